"""The executor: every call is validated, guarded, retried by policy and recorded as two steps."""

import asyncio
from dataclasses import replace
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest

from app.chain import (
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    StepType,
    ThinkingInfo,
    ToolResultInfo,
    ToolType,
)
from app.tools.base import BaseTool
from app.tools.errors import (
    ErrorClass,
    GuardRejection,
    ToolError,
    ToolRateLimitError,
    TransientToolError,
)
from app.tools.executor import ToolExecutor
from app.tools.guards import PendingCall
from app.tools.models import (
    CallEstimate,
    RetryPolicy,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
)
from app.tools.recording import InMemoryCostRecorder
from app.tools.registry import ToolRegistry
from app.tools.results import ToolInvocation
from app.tools.services import ToolServices
from tests.factories import context_for, new_chain

_OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class EchoTool(BaseTool):
    """Returns its `text`; with `usage`, reports tokens and cost like an LLM would."""

    def __init__(self, name: str = "echo", *, usage: bool = False) -> None:
        self._definition = ToolDefinition(
            name=name, type=ToolType.SKILL, description="echoes", parameters=_OBJECT
        )
        self._usage = usage
        self.calls: list[dict[str, Any]] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.calls.append(arguments)
        if not self._usage:
            return ToolOutput(arguments["text"])
        return ToolOutput(
            arguments["text"],
            model="m",
            deployment="m#1",
            input_tokens=10,
            output_tokens=4,
            cost_usd=Decimal("0.00007"),
        )

    async def estimate(self, arguments: dict[str, Any], context: ToolCallContext) -> CallEstimate:
        return CallEstimate(input_tokens=10, max_output_tokens=100, cost_usd=Decimal("0.001"))


class ScriptedTool(BaseTool):
    """Raises the scripted errors in turn, then succeeds."""

    def __init__(self, errors: list[Exception], retry: RetryPolicy, timeout_s: float = 5) -> None:
        self._errors = list(errors)
        self._definition = ToolDefinition(
            name="flaky",
            type=ToolType.EXTERNAL,
            description="fails first",
            retry=retry,
            timeout_s=timeout_s,
        )
        self.attempts: list[int] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.attempts.append(context.attempt)
        if self._errors:
            raise self._errors.pop(0)
        return ToolOutput("fine")


class BlockingTool(BaseTool):
    """Signals that it started, then waits for `release` (forever unless released)."""

    def __init__(self, name: str = "blocking", *, timeout_s: float = 30) -> None:
        self._definition = ToolDefinition(
            name=name, type=ToolType.EXTERNAL, description="waits", timeout_s=timeout_s
        )
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return ToolOutput(self.definition.name)


class RecordingSleep:
    """Stands in for asyncio.sleep so backoff delays are observed, not waited for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _executor(*tools: BaseTool, **options: Any) -> ToolExecutor:
    return ToolExecutor(ToolRegistry(list(tools)), **options)


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


async def test_retryable_failures_back_off_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(
        max_attempts=5, initial_backoff_s=1.0, multiplier=2.0, max_backoff_s=3.0, jitter=0.0
    )
    errors: list[Exception] = [
        TransientToolError("502"),
        ToolRateLimitError("429"),
        TransientToolError("503"),
        TransientToolError("500"),
    ]
    tool = ScriptedTool(errors, policy)
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert result.success
    assert result.info.attempts == 5
    assert tool.attempts == [1, 2, 3, 4, 5]
    assert sleep.delays == [1.0, 2.0, 3.0, 3.0]
    failed = result.info.failed_attempts
    assert [(f.attempt, f.error_class, f.message) for f in failed] == [
        (1, ErrorClass.TRANSIENT, "502"),
        (2, ErrorClass.RATE_LIMIT, "429"),
        (3, ErrorClass.TRANSIENT, "503"),
        (4, ErrorClass.TRANSIENT, "500"),
    ]
    assert [f.backoff_s for f in failed] == [1.0, 2.0, 3.0, 3.0]


async def test_a_servers_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.1, max_backoff_s=5.0, jitter=0.0)
    tool = ScriptedTool(
        [
            ToolRateLimitError("slow down", retry_after_s=2.5),
            ToolRateLimitError("slow down", retry_after_s=60),
        ],
        policy,
    )
    sleep = RecordingSleep()
    chain = new_chain()
    await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert sleep.delays == [2.5, 5.0]


async def test_retries_stop_at_max_attempts_and_report_every_failure() -> None:
    policy = RetryPolicy(max_attempts=2, initial_backoff_s=0.5, jitter=0.0)
    tool = ScriptedTool(
        [TransientToolError("a"), TransientToolError("b"), TransientToolError("c")], policy
    )
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert not result.success
    assert result.error == "b"
    assert result.info.attempts == 2
    assert tool.attempts == [1, 2]
    assert sleep.delays == [0.5]
    assert [f.backoff_s for f in result.info.failed_attempts] == [0.5, None]


@pytest.mark.parametrize(
    "error",
    [
        ToolError("permanent"),
        ToolError("auth", error_class=ErrorClass.PERMANENT, status_code=401),
        TransientToolError("not in this policy's retry_on"),
    ],
)
async def test_errors_the_policy_does_not_name_are_not_retried(error: ToolError) -> None:
    policy = RetryPolicy(max_attempts=4, retry_on=frozenset({ErrorClass.RATE_LIMIT}))
    tool = ScriptedTool([error], policy)
    sleep = RecordingSleep()
    chain = new_chain()
    result = await _executor(tool, sleep=sleep).execute(chain, context_for(chain), "flaky", {})

    assert not result.success
    assert tool.attempts == [1]
    assert sleep.delays == []


async def test_timeouts_are_retried_when_the_policy_says_so() -> None:
    class SlowOnce(ScriptedTool):
        async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
            self.attempts.append(context.attempt)
            if context.attempt == 1:
                await asyncio.Event().wait()  # never set: only the timeout ends it
            return ToolOutput("second time lucky")

    tool = SlowOnce([], RetryPolicy(max_attempts=2, initial_backoff_s=0, jitter=0), timeout_s=0.05)
    chain = new_chain()
    result = await _executor(tool).execute(chain, context_for(chain), "flaky", {})

    assert result.success
    assert result.value == "second time lucky"
    assert [f.error_class for f in result.info.failed_attempts] == [ErrorClass.TIMEOUT]


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


class RecordingGuard:
    def __init__(self, reject: GuardRejection | None = None, *, after: bool = False) -> None:
        self.reject = reject
        self.reject_after = after
        self.before: list[str] = []
        self.after: list[ToolResultInfo] = []
        self.abandoned: list[str] = []
        self.estimates: list[CallEstimate | None] = []

    async def before_call(self, call: PendingCall) -> None:
        self.before.append(call.definition.name)
        self.estimates.append(await call.estimate())
        self.estimates.append(await call.estimate())
        if self.reject is not None and not self.reject_after:
            raise self.reject

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        self.after.append(result)
        if self.reject is not None and self.reject_after:
            raise self.reject

    def abandon(self, call: PendingCall) -> None:
        self.abandoned.append(call.definition.name)


async def test_a_guard_a_later_guard_overrules_is_told_to_abandon_the_call() -> None:
    reserving = RecordingGuard()
    refusing = RecordingGuard(GuardRejection(ErrorCode.RATE_LIMITED, "no"))
    chain = new_chain()
    with pytest.raises(GuardRejection):
        await _executor(EchoTool(), guards=[reserving, refusing]).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )

    assert reserving.abandoned == ["echo"]
    assert reserving.after == []
    assert refusing.abandoned == []  # it refused: it reserved nothing


async def test_a_cancelled_call_is_abandoned_by_its_guards_and_never_settled() -> None:
    blocking = BlockingTool()
    guard = RecordingGuard()
    chain = new_chain()
    call = asyncio.ensure_future(
        _executor(blocking, guards=[guard]).execute(chain, context_for(chain), "blocking", {})
    )
    await blocking.started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    assert guard.abandoned == ["blocking"]
    assert guard.after == []


async def test_a_runs_own_guards_follow_the_executors() -> None:
    shared, own = RecordingGuard(), RecordingGuard()
    chain = new_chain()
    context = replace(context_for(chain), guards=(own,))
    await _executor(EchoTool(), guards=[shared]).execute(chain, context, "echo", {"text": "hi"})

    assert shared.before == own.before == ["echo"]
    assert len(shared.after) == len(own.after) == 1
    assert shared.abandoned == own.abandoned == []


async def test_guards_see_every_call_before_and_its_result_after() -> None:
    guard = RecordingGuard()
    chain = new_chain()
    await _executor(EchoTool(usage=True), guards=[guard]).execute(
        chain, context_for(chain), "echo", {"text": "hi"}
    )

    assert guard.before == ["echo"]
    estimate = CallEstimate(input_tokens=10, max_output_tokens=100, cost_usd=Decimal("0.001"))
    assert guard.estimates == [estimate, estimate]
    [seen] = guard.after
    assert seen.cost_usd == Decimal("0.00007")
    assert seen.input_tokens == 10


async def test_a_guard_rejection_is_a_failed_step_and_ends_the_run_with_its_code() -> None:
    echo = EchoTool()
    guard = RecordingGuard(GuardRejection(ErrorCode.BUDGET_EXCEEDED, "max_cost_usd reached"))
    chain = new_chain()
    with pytest.raises(GuardRejection) as raised:
        await _executor(echo, guards=[guard]).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )

    assert raised.value.error_code is ErrorCode.BUDGET_EXCEEDED
    assert echo.calls == []  # refused calls never run
    assert guard.after == []
    result = chain.steps[-1].tool_result
    assert result is not None
    assert not result.success
    assert (result.error_code, result.error) == (
        ErrorCode.BUDGET_EXCEEDED,
        "max_cost_usd reached",
    )


async def test_a_rejection_that_does_not_end_the_run_is_only_a_failed_step() -> None:
    guard = RecordingGuard(
        GuardRejection(ErrorCode.PERMISSION_DENIED, "not for you", ends_run=False)
    )
    chain = new_chain()
    result = await _executor(EchoTool(), guards=[guard]).execute(
        chain, context_for(chain), "echo", {"text": "hi"}
    )
    assert result.error_code is ErrorCode.PERMISSION_DENIED


async def test_an_after_call_rejection_keeps_the_result_and_ends_the_run() -> None:
    recorder = InMemoryCostRecorder()
    guard = RecordingGuard(GuardRejection(ErrorCode.BUDGET_EXCEEDED, "spent"), after=True)
    chain = new_chain()
    with pytest.raises(GuardRejection):
        await _executor(EchoTool(usage=True), guards=[guard], recorder=recorder).execute(
            chain, context_for(chain), "echo", {"text": "hi"}
        )
    result = chain.steps[-1].tool_result
    assert result is not None
    assert result.success
    assert len(recorder.records) == 1  # and so is its cost


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
    changes = {"correlation_id": uuid4(), "parent_step_id": uuid4(), "attempt": 4}
    assert context.at(**changes) == replace(context, **changes)
    assert context.at() == context
    # an attempt shares its call's record of the children it started; a new call has its own
    assert context.at(attempt=2).started is context.started
    call_step = ReasoningStep(type=StepType.THINKING, thinking=ThinkingInfo(thought="x"))
    assert context.at(call_step=call_step).started is not context.started


async def _stored() -> None:
    return None
