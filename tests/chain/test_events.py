"""The chain event union: one Literal tag per event, lossless JSON round trips, nothing unknown."""

import json
from decimal import Decimal
from uuid import uuid4

import pytest
from pydantic import ValidationError

from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainMetrics,
    ChainStartedEvent,
    DoneEvent,
    ErrorCode,
    ReasoningStep,
    ReasoningStepEvent,
    StepType,
    TaskState,
    TaskStatusEvent,
    ToolResultInfo,
    chain_event_adapter,
)

CHAIN_ID = uuid4()
METRICS = ChainMetrics(
    total_steps=2,
    llm_calls=1,
    tool_calls=1,
    input_tokens=12,
    output_tokens=3,
    total_tokens=15,
    total_cost_usd=Decimal("0.00003"),
    total_duration_ms=12.5,
)
STEP = ReasoningStep(
    step_number=2,
    type=StepType.TOOL_RESULT,
    tool_result=ToolResultInfo(
        correlation_id=uuid4(),
        success=True,
        result={"rows": [{"id": 1, "tags": ["a", None]}], "ok": True},
        duration_ms=12.5,
        input_tokens=12,
        output_tokens=3,
        total_tokens=15,
        cost_usd=Decimal("0.00003"),
    ),
)

EVENTS: list[tuple[ChainEvent, str]] = [
    (ChainStartedEvent(task_id="t", chain_id=CHAIN_ID), "chain_started"),
    (TaskStatusEvent(task_id="t", chain_id=CHAIN_ID, state=TaskState.WORKING), "task_status"),
    (
        ReasoningStepEvent(task_id="t", chain_id=CHAIN_ID, step=STEP, metrics=METRICS),
        "reasoning_step",
    ),
    (
        ChainCompletedEvent(task_id="t", chain_id=CHAIN_ID, answer="42", metrics=METRICS),
        "chain_completed",
    ),
    (
        ChainFailedEvent(
            task_id="t",
            chain_id=CHAIN_ID,
            error_code=ErrorCode.BUDGET_EXCEEDED,
            error_message="over budget",
            metrics=METRICS,
        ),
        "chain_failed",
    ),
    (DoneEvent(task_id="t", chain_id=CHAIN_ID, final_state=TaskState.COMPLETED), "done"),
]
EVENT_IDS = [tag for _, tag in EVENTS]
ONLY_EVENTS = [event for event, _ in EVENTS]


@pytest.mark.parametrize(("event", "tag"), EVENTS, ids=EVENT_IDS)
def test_each_event_carries_its_type_tag(event: ChainEvent, tag: str) -> None:
    assert event.type == tag
    assert json.loads(event.model_dump_json())["type"] == tag


@pytest.mark.parametrize("event", ONLY_EVENTS, ids=EVENT_IDS)
def test_every_event_round_trips_through_json(event: ChainEvent) -> None:
    restored = chain_event_adapter.validate_json(event.model_dump_json())

    assert type(restored) is type(event)
    assert restored == event


def test_event_type_tag_cannot_be_set_to_another_name() -> None:
    with pytest.raises(ValidationError):
        ChainStartedEvent.model_validate(
            {"task_id": "t", "chain_id": str(CHAIN_ID), "type": "done"}
        )


def test_unknown_event_type_is_refused() -> None:
    payload = {"type": "chain_paused", "task_id": "t", "chain_id": str(CHAIN_ID)}

    with pytest.raises(ValidationError, match="chain_paused"):
        chain_event_adapter.validate_json(json.dumps(payload))


@pytest.mark.parametrize("event", ONLY_EVENTS, ids=EVENT_IDS)
def test_extra_fields_are_refused(event: ChainEvent) -> None:
    payload = {**json.loads(event.model_dump_json()), "surprise": 1}

    with pytest.raises(ValidationError, match="surprise"):
        chain_event_adapter.validate_json(json.dumps(payload))


def test_chain_completed_carries_the_answer_and_reads_events_stored_before_it() -> None:
    event = ChainCompletedEvent(
        task_id="t", chain_id=CHAIN_ID, answer="6 * 7 = 42.", metrics=METRICS
    )
    stored_before = json.loads(event.model_dump_json())
    del stored_before["answer"]  # as events written before the field existed are stored

    assert json.loads(event.model_dump_json())["answer"] == "6 * 7 = 42."
    restored = chain_event_adapter.validate_python(stored_before)
    assert isinstance(restored, ChainCompletedEvent)
    assert restored.answer is None
