"""The executor: every call is validated and recorded as two steps; a failure, a timeout or a
cancellation is a failed result; usage reaches the recorder; oversized results are truncated;
a batch runs concurrently; a call's context derives per attempt."""

import asyncio
from dataclasses import replace
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest

from app.chain import ErrorCode, ReasoningChain, ReasoningStep, StepType, ThinkingInfo
from app.tools.models import RetryPolicy, ToolCallContext, ToolOutput
from app.tools.recording import InMemoryCostRecorder
from app.tools.results import ToolInvocation
from app.tools.services import ToolServices
from tests.factories import context_for, new_chain
from tests.tools.executor_helpers import (
    BlockingTool,
    EchoTool,
    RecordingGuard,
    ScriptedTool,
    _executor,
)


async def test_a_call_records_a_tool_call_and_a_tool_result_step_sharing_a_correlation_id() -> None:
    chain = new_chain()
    parent = chain.add_step(_thinking("about to call"))
    result = await _executor(EchoTool()).execute(
        chain, context_for(chain, parent_step_id=parent.id), "echo", {"text": "hi"}
    )

    assert [s.type for s in chain.steps] == [
        StepType.THINKING,
        StepType.TOOL_CALL,
        StepType.TOOL_RESULT,
    ]
    call, outcome = chain.steps[1], chain.steps[2]
    assert call.tool_call is not None
    assert outcome.tool_result is not None
    assert call.tool_call.tool_name == "echo"
    assert call.tool_call.arguments == {"text": "hi"}
    assert call.tool_call.correlation_id == outcome.tool_result.correlation_id
    assert call.parent_step_id == parent.id
    assert outcome.parent_step_id == call.id
    assert outcome.tool_result.success
    assert outcome.tool_result.result == "hi"
    assert outcome.tool_result.attempts == 1
    assert result.value == "hi"
    assert result.result_step is outcome
    assert outcome.visibility.summary == "echo succeeded"


@pytest.mark.parametrize(
    ("arguments", "field", "fragment"),
    [
        ({}, "text", "is required"),
        ({"text": 5}, "text", "is not of type 'string'"),
        ('{"text": ', "", "not valid JSON"),
        ("[1, 2]", "", "must be a JSON object"),
    ],
)
async def test_invalid_arguments_become_a_failed_result_naming_the_field(
    arguments: dict[str, Any] | str, field: str, fragment: str
) -> None:
    echo = EchoTool()
    chain = new_chain()
    result = await _executor(echo).execute(chain, context_for(chain), "echo", arguments)

    assert not result.success
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert fragment in (result.error or "")
    if field:
        assert f"{field}: " in (result.error or "")
    assert echo.calls == []  # validated before anything runs
    assert [s.type for s in chain.steps] == [StepType.TOOL_CALL, StepType.TOOL_RESULT]


async def test_an_unknown_tool_is_a_failed_result_listing_the_available_tools() -> None:
    chain = new_chain()
    result = await _executor(EchoTool()).execute(chain, context_for(chain), "nope", {})

    assert result.error_code is ErrorCode.UNKNOWN_TOOL
    assert "'nope'" in (result.error or "")
    assert "echo" in (result.error or "")


async def test_tools_outside_the_runs_allowed_set_are_unknown_to_it() -> None:
    chain = new_chain()
    executor = _executor(EchoTool("echo"), EchoTool("other"))
    context = context_for(chain, allowed_tools=frozenset({"echo"}))

    refused = await executor.execute(chain, context, "other", {"text": "x"})
    allowed = await executor.execute(chain, context, "echo", {"text": "x"})

    assert refused.error_code is ErrorCode.UNKNOWN_TOOL
    assert "available tools: echo" in (refused.error or "")
    assert allowed.success


async def test_a_tool_that_raises_yields_a_failed_result_with_the_exception() -> None:
    tool = ScriptedTool([ValueError("bad input value")], RetryPolicy(max_attempts=3))
    chain = new_chain()
    result = await _executor(tool).execute(chain, context_for(chain), "flaky", {})

    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == "flaky raised ValueError: bad input value"
    assert tool.attempts == [1]  # a bug is not a transient failure: no retry


async def test_a_tool_that_times_out_yields_a_failed_timeout_result() -> None:
    tool = BlockingTool(timeout_s=0.05)
    chain = new_chain()
    result = await _executor(tool).execute(chain, context_for(chain), "blocking", {})

    assert result.error_code is ErrorCode.TIMEOUT
    assert result.error == "blocking timed out after 0.05 s"
    assert result.info.duration_ms >= 50


async def test_usage_is_on_the_result_step_and_handed_to_the_recorder() -> None:
    recorder = InMemoryCostRecorder()
    chain = new_chain()
    context = context_for(chain, tenant_id="acme", user_id="ann")
    result = await _executor(EchoTool(usage=True), recorder=recorder).execute(
        chain, context, "echo", {"text": "hi"}
    )

    info = result.info
    assert (info.input_tokens, info.output_tokens, info.total_tokens) == (10, 4, 14)
    assert info.cost_usd == Decimal("0.00007")
    assert not info.unpriced
    [record] = recorder.records
    assert record.step_id == result.result_step.id
    assert record.correlation_id == info.correlation_id
    assert (record.tenant_id, record.user_id, record.task_id) == ("acme", "ann", chain.task_id)
    assert (record.tool_name, record.model, record.deployment) == ("echo", "m", "m#1")
    assert (record.input_tokens, record.output_tokens, record.cost_usd) == (
        10,
        4,
        Decimal("0.00007"),
    )
    assert chain.metrics.total_cost_usd == Decimal("0.00007")


async def test_calls_without_usage_are_not_recorded() -> None:
    recorder = InMemoryCostRecorder()
    chain = new_chain()
    await _executor(EchoTool(), recorder=recorder).execute(
        chain, context_for(chain), "echo", {"text": "hi"}
    )
    assert recorder.records == []


async def test_an_oversized_result_is_truncated_in_the_step_with_a_marker() -> None:
    chain = new_chain()
    text = "x" * 1000
    result = await _executor(EchoTool(), max_result_chars=100).execute(
        chain, context_for(chain), "echo", {"text": text}
    )

    stored = result.info.result
    assert isinstance(stored, str)
    assert stored.startswith("x" * 100)
    assert stored.endswith("…[truncated: 100 of 1000 characters shown]")
    assert result.info.truncated
    assert result.info.original_chars == 1000
    assert result.value == text  # the caller still gets the whole value


async def test_a_structured_result_over_the_limit_is_stored_as_truncated_json() -> None:
    class ListTool(EchoTool):
        async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
            return ToolOutput([{"row": n} for n in range(100)])

    chain = new_chain()
    result = await _executor(ListTool(), max_result_chars=64).execute(
        chain, context_for(chain), "echo", {"text": "x"}
    )
    stored = result.info.result
    assert isinstance(stored, str)
    assert stored.startswith('[{"row": 0}, {"row": 1}')
    assert "…[truncated: 64 of" in stored
    assert result.info.truncated


async def test_a_batch_runs_concurrently_and_records_steps_in_call_order() -> None:
    first, second = BlockingTool("first"), BlockingTool("second")

    class Releaser(EchoTool):
        async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
            await first.started.wait()  # only possible if `first` runs at the same time
            first.release.set()
            second.release.set()
            return ToolOutput("released")

    chain = new_chain()
    executor = _executor(first, second, Releaser("releaser"))
    async with asyncio.timeout(5):  # a sequential executor would hang on `first`
        results = await executor.execute_batch(
            chain,
            context_for(chain),
            [
                ToolInvocation("first", {}),
                ToolInvocation("releaser", {"text": "go"}),
                ToolInvocation("second", {}),
            ],
        )

    assert [r.value for r in results] == ["first", "released", "second"]
    names = [(s.type, (s.tool_call or s.tool_result) and _name(chain, s)) for s in chain.steps]
    assert names == [
        (StepType.TOOL_CALL, "first"),
        (StepType.TOOL_CALL, "releaser"),
        (StepType.TOOL_CALL, "second"),
        (StepType.TOOL_RESULT, "first"),
        (StepType.TOOL_RESULT, "releaser"),
        (StepType.TOOL_RESULT, "second"),
    ]


async def test_cancelling_a_call_records_it_as_cancelled() -> None:
    tool = BlockingTool()
    chain = new_chain()
    call = asyncio.create_task(_executor(tool).execute(chain, context_for(chain), "blocking", {}))
    await tool.started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    result = chain.steps[-1].tool_result
    assert result is not None
    assert result.error_code is ErrorCode.CANCELLED


def _thinking(text: str) -> ReasoningStep:
    return ReasoningStep(type=StepType.THINKING, thinking=ThinkingInfo(thought=text))


def _name(chain: ReasoningChain, step: ReasoningStep) -> str:
    if step.tool_call is not None:
        return step.tool_call.tool_name
    assert step.tool_result is not None
    call = chain.step_by_correlation_id(step.tool_result.correlation_id)
    assert call is not None
    assert call.tool_call is not None
    return call.tool_call.tool_name


async def test_a_failing_recorder_does_not_leave_the_rest_of_a_batch_running() -> None:
    class BrokenRecorder:
        async def record_cost(self, record: Any) -> None:
            raise RuntimeError("cost store unavailable")

    blocking = BlockingTool()
    chain = new_chain()
    executor = _executor(EchoTool(usage=True), blocking, recorder=BrokenRecorder())
    with pytest.raises(RuntimeError, match="cost store unavailable"):
        await executor.execute_batch(
            chain,
            context_for(chain),
            [ToolInvocation("echo", {"text": "hi"}), ToolInvocation("blocking", {})],
        )
    async with asyncio.timeout(2):
        await blocking.cancelled.wait()


class _AnyModel:
    def approves(self, model: str) -> bool:
        return True

    def output_cap(self, model: str) -> int | None:
        return None


def test_a_call_context_derived_with_at_keeps_every_other_field() -> None:
    guard = RecordingGuard()
    context = ToolCallContext(
        task_id="t",
        agent_id="a",
        chain_id=uuid4(),
        tenant_id="acme",
        user_id="alice",
        parent_step_id=uuid4(),
        attempt=3,
        allowed_tools=frozenset({"echo"}),
        roles=frozenset({"member"}),
        on_delta=print,
        guards=(guard,),
        models=_AnyModel(),
        services=ToolServices(),
        on_progress=print,
        stored=_stored,
    )
    call, parent = uuid4(), uuid4()
    assert context.at(correlation_id=call, parent_step_id=parent, attempt=4) == replace(
        context, correlation_id=call, parent_step_id=parent, attempt=4
    )
    assert context.at() == context
    # an attempt shares its call's record of the children it started; a new call has its own
    assert context.at(attempt=2).started is context.started
    call_step = ReasoningStep(type=StepType.THINKING, thinking=ThinkingInfo(thought="x"))
    assert context.at(call_step=call_step).started is not context.started


async def _stored() -> None:
    return None
