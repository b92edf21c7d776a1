"""ReasoningChain numbers its steps, keeps exact running totals and tells listeners at once."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import ValidationError

from app.chain import (
    ChainMetrics,
    ChainStatus,
    ErrorCode,
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    format_usd,
    quantize_usd,
)
from tests.factories import new_chain


def thinking(thought: str = "hmm") -> ReasoningStep:
    return ReasoningStep(type=StepType.THINKING, thinking=ThinkingInfo(thought=thought))


def call(tool_type: ToolType = ToolType.CUSTOM, name: str = "tool") -> ReasoningStep:
    return ReasoningStep(
        type=StepType.TOOL_CALL, tool_call=ToolCallInfo(tool_type=tool_type, tool_name=name)
    )


def result(call_step: ReasoningStep, **fields: Any) -> ReasoningStep:
    assert call_step.tool_call is not None
    info = ToolResultInfo(
        correlation_id=call_step.tool_call.correlation_id,
        **{"success": True, "duration_ms": 1.0, **fields},
    )
    return ReasoningStep(type=StepType.TOOL_RESULT, tool_result=info)


def assert_utc(moment: datetime | None) -> None:
    assert moment is not None
    assert moment.tzinfo is not None
    assert moment.utcoffset() == timedelta(0)


def test_steps_are_numbered_from_one_in_order() -> None:
    chain = new_chain()

    added = [chain.add_step(thinking(str(n))) for n in range(3)]

    assert [step.step_number for step in added] == [1, 2, 3]
    assert chain.steps == added
    assert chain.metrics.total_steps == 3


def test_listeners_are_called_synchronously_in_order_of_registration() -> None:
    chain = new_chain()
    seen: list[tuple[str, int]] = []
    chain.add_listener(lambda step: seen.append(("first", step.step_number)))
    chain.add_listener(lambda step: seen.append(("second", step.step_number)))

    chain.add_step(thinking())
    after_one = list(seen)
    chain.add_step(thinking())

    assert after_one == [("first", 1), ("second", 1)]
    assert seen == [("first", 1), ("second", 1), ("first", 2), ("second", 2)]


def test_removed_listener_is_no_longer_called() -> None:
    chain = new_chain()
    seen: list[int] = []

    def listener(step: ReasoningStep) -> None:
        seen.append(step.step_number)

    chain.add_listener(listener)
    chain.add_step(thinking())
    chain.remove_listener(listener)
    chain.add_step(thinking())

    assert seen == [1]


def test_listener_sees_metrics_that_already_include_its_step() -> None:
    chain = new_chain()
    totals: list[tuple[int, int]] = []
    chain.add_listener(
        lambda _: totals.append((chain.metrics.total_steps, chain.metrics.llm_calls))
    )

    chain.add_step(call(ToolType.LLM))
    chain.add_step(call(ToolType.EXTERNAL))

    assert totals == [(1, 1), (2, 1)]


def test_metrics_are_updated_incrementally_and_exactly() -> None:
    chain = new_chain()
    llm_a, web, llm_b = (
        call(ToolType.LLM, "llm"),
        call(ToolType.EXTERNAL, "web"),
        call(ToolType.LLM),
    )
    steps = [
        thinking(),
        llm_a,
        result(
            llm_a,
            input_tokens=10,
            output_tokens=5,
            total_tokens=15,
            cost_usd=Decimal("0.1"),
            duration_ms=100.5,
        ),
        web,
        result(web, success=False, error="boom", duration_ms=20.25),
        llm_b,
        result(
            llm_b,
            input_tokens=7,
            output_tokens=3,
            total_tokens=10,
            cost_usd=Decimal("0.2"),
            duration_ms=0.25,
        ),
        result(llm_b, input_tokens=1, output_tokens=1, total_tokens=2, unpriced=True),
    ]
    snapshots: list[ChainMetrics] = []

    for step in steps:
        chain.add_step(step)
        snapshots.append(chain.metrics.model_copy())

    assert [(m.tool_calls, m.llm_calls, m.failed_tool_calls) for m in snapshots] == [
        (0, 0, 0),
        (1, 1, 0),
        (1, 1, 0),
        (2, 1, 0),
        (2, 1, 1),
        (3, 2, 1),
        (3, 2, 1),
        (3, 2, 1),
    ]
    assert [m.total_cost_usd for m in snapshots[2:]] == [Decimal("0.1")] * 4 + [Decimal("0.3")] * 2
    assert chain.metrics == ChainMetrics(
        total_steps=8,
        llm_calls=2,
        tool_calls=3,
        failed_tool_calls=1,
        input_tokens=18,
        output_tokens=9,
        total_tokens=27,
        total_cost_usd=Decimal("0.3"),
        unpriced_calls=1,
        total_duration_ms=122.0,
    )
    assert isinstance(chain.metrics.total_cost_usd, Decimal)
    assert chain.metrics.total_cost_usd == Decimal("0.3")


@pytest.mark.parametrize(
    ("step_type", "payloads"),
    [
        (StepType.THINKING, {}),
        (StepType.THINKING, {"synthesis": SynthesisInfo(conclusion="c")}),
        (
            StepType.THINKING,
            {"thinking": ThinkingInfo(thought="t"), "synthesis": SynthesisInfo(conclusion="c")},
        ),
        (StepType.TOOL_CALL, {"thinking": ThinkingInfo(thought="t")}),
        (
            StepType.TOOL_RESULT,
            {"tool_call": ToolCallInfo(tool_type=ToolType.CUSTOM, tool_name="x")},
        ),
        (StepType.SYNTHESIS, {}),
    ],
    ids=["none", "wrong", "two", "call-with-thinking", "result-with-call", "synthesis-none"],
)
def test_step_with_wrong_or_extra_payload_is_refused(
    step_type: StepType, payloads: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError, match="exactly the"):
        ReasoningStep(type=step_type, **payloads)


@pytest.mark.parametrize(
    "status", [ChainStatus.COMPLETED, ChainStatus.FAILED, ChainStatus.CANCELLED]
)
def test_finished_chain_refuses_new_steps(status: ChainStatus) -> None:
    chain = new_chain()
    chain.add_step(thinking())
    chain.finish(status)

    with pytest.raises(ValueError, match="no more steps"):
        chain.add_step(thinking())

    assert len(chain.steps) == 1
    assert chain.metrics.total_steps == 1


@pytest.mark.parametrize(
    "status",
    [ChainStatus.INITIALIZING, ChainStatus.THINKING, ChainStatus.TOOL_CALLING, ChainStatus.WAITING],
)
def test_finish_refuses_a_non_terminal_status(status: ChainStatus) -> None:
    chain = new_chain()

    with pytest.raises(ValueError, match="not a terminal"):
        chain.finish(status)

    assert chain.status is ChainStatus.INITIALIZING
    assert chain.completed_at is None


def test_finish_records_the_outcome_and_stamps_utc_completion() -> None:
    chain = new_chain()
    before = datetime.now(UTC)

    chain.finish(ChainStatus.FAILED, ErrorCode.TOOL_ERROR, "the tool broke")

    assert chain.status is ChainStatus.FAILED
    assert chain.error_code is ErrorCode.TOOL_ERROR
    assert chain.error_message == "the tool broke"
    assert_utc(chain.completed_at)
    assert chain.completed_at is not None
    assert before <= chain.completed_at <= datetime.now(UTC)


def test_timestamps_are_timezone_aware_utc() -> None:
    chain = new_chain()
    step = chain.add_step(thinking())
    chain.finish(ChainStatus.COMPLETED)

    restored = type(chain).model_validate_json(chain.model_dump_json())

    for moment in [chain.started_at, step.timestamp, chain.completed_at]:
        assert_utc(moment)
    for moment in [restored.started_at, restored.steps[0].timestamp, restored.completed_at]:
        assert_utc(moment)
    assert restored.started_at == chain.started_at


def test_step_by_correlation_id_finds_the_call_step() -> None:
    chain = new_chain()
    first, second = call(name="a"), call(name="b")
    for step in [first, result(first), second, result(second)]:
        chain.add_step(step)
    assert second.tool_call is not None

    found = chain.step_by_correlation_id(second.tool_call.correlation_id)

    assert found is second
    assert chain.step_by_correlation_id(uuid4()) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3e-06 * 10, Decimal("0.00003")),
        (0.1 + 0.2, Decimal("0.3")),
        (1.5e-07 * 1000, Decimal("0.00015")),
        (0.0, Decimal("0")),
        (Decimal("0.1"), Decimal("0.1")),
        (Decimal("1.0000000000004"), Decimal("1")),
        (Decimal("1.0000000000005"), Decimal("1")),
        (Decimal("1.0000000000015"), Decimal("1.000000000002")),
    ],
)
def test_quantize_usd_removes_float_noise(value: float | Decimal, expected: Decimal) -> None:
    amount = quantize_usd(value)

    assert isinstance(amount, Decimal)
    assert amount == expected


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (quantize_usd(3e-06 * 10), "0.00003"),
        (Decimal(0), "0"),
        (quantize_usd(0.0), "0"),
        (Decimal("-0.000"), "0"),
        (Decimal("1E-7"), "0.0000001"),
        (Decimal("12.500"), "12.5"),
        (Decimal("1E+3"), "1000"),
    ],
)
def test_usd_amounts_format_as_plain_decimals(amount: Decimal, text: str) -> None:
    assert format_usd(amount) == text


def test_usd_fields_serialize_to_json_strings_and_stay_decimal_in_python() -> None:
    info = ToolResultInfo(
        correlation_id=UUID(int=1),
        success=True,
        duration_ms=1.0,
        cost_usd=quantize_usd(3e-06 * 10),
    )
    metrics = ChainMetrics()

    assert json.loads(info.model_dump_json())["cost_usd"] == "0.00003"
    assert json.loads(metrics.model_dump_json())["total_cost_usd"] == "0"
    assert isinstance(info.model_dump()["cost_usd"], Decimal)
    assert isinstance(metrics.model_dump()["total_cost_usd"], Decimal)
    restored = ToolResultInfo.model_validate_json(info.model_dump_json())
    assert restored.cost_usd == Decimal("0.00003")
    assert isinstance(restored.cost_usd, Decimal)
