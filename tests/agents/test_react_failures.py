"""The ReAct agent end to end when something goes wrong: a failing tool is an observation the
agent goes on from; a guard's rejection, the iteration limit, an LLM failing past its retries
and fallbacks, or a cancellation ends the chain with its error code and keeps what was spent."""

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentTask
from app.chain import (
    ChainFailedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    TaskState,
    ToolResultInfo,
    ToolType,
)
from app.tools.base import BaseTool
from app.tools.errors import GuardRejection
from app.tools.guards import PendingCall
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from tests.agents.react_helpers import _cost, _run, _runtime, _shape, _tools
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall


class ExplodingTool(BaseTool):
    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name="explode", type=ToolType.EXTERNAL, description="always fails")

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        raise ConnectionResetError("peer reset the connection")


class StuckTool(BaseTool):
    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name="stuck", type=ToolType.EXTERNAL, description="hangs", timeout_s=0.05
        )

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        await asyncio.Event().wait()  # only the executor's timeout ends this
        raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("call", "error_code", "message"),
    [
        (ToolCall("calculator", {}), "invalid_arguments", "expression: is required"),
        (ToolCall("calculator", "{not json"), "invalid_arguments", "not valid JSON"),
        (ToolCall("explode", {}), "tool_error", "ConnectionResetError: peer reset"),
        (ToolCall("stuck", {}), "timeout", "stuck timed out after 0.05 s"),
        (ToolCall("web-search", {"q": "x"}), "unknown_tool", "unknown tool 'web-search'"),
    ],
    ids=["invalid-arguments", "invalid-json", "raises", "times-out", "unknown"],
)
async def test_a_failing_tool_becomes_an_observation_and_the_agent_continues(
    fake_llm: FakeLLMServer, tmp_path: Path, call: ToolCall, error_code: str, message: str
) -> None:
    runtime = _runtime(
        fake_llm, tmp_path, native=True, tools=[*_tools(), ExplodingTool(), StuckTool()]
    )
    fake_llm.script(
        "agent-model",
        Reply.tool_calls([ToolCall(call.name, call.arguments, id="x1")]),
        Reply.text("I could not do it."),
    )

    events, chain = await _run(runtime, AgentTask(input="try"))

    failed = chain.steps[3].tool_result
    assert failed is not None
    assert not failed.success
    assert failed.error_code == error_code
    assert message in (failed.error or "")
    observation = fake_llm.requests[1].body["messages"][-1]
    assert observation["tool_call_id"] == "x1"
    assert observation["content"].startswith(f"Error ({error_code}): ")
    assert message in observation["content"]
    assert chain.status is ChainStatus.COMPLETED
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].final_state is TaskState.COMPLETED


class RejectTool:
    """Refuses every call of one tool, as a rate limit would."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def before_call(self, call: PendingCall) -> None:
        if call.definition.name == self.name:
            raise GuardRejection(ErrorCode.RATE_LIMITED, f"{self.name}: 0 calls left this minute")

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        return None

    def abandon(self, call: PendingCall) -> None:
        return None


async def test_a_guard_rejection_ends_the_chain_with_the_guards_error_code(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True, guards=[RejectTool("current_time")])
    fake_llm.script(
        "agent-model",
        Reply.tool_calls(
            [ToolCall("current_time", {"timezone": "UTC"})], prompt_tokens=40, completion_tokens=8
        ),
    )

    events, chain = await _run(runtime, AgentTask(input="time?"))

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.RATE_LIMITED
    assert failed.error_message == "current_time: 0 calls left this minute"
    assert failed.metrics.total_cost_usd == _cost(40, 8)  # what was spent is kept
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].final_state is TaskState.FAILED
    assert _shape(chain)[-2:] == [("tool_call", "current_time"), ("tool_result", "current_time")]
    assert chain.steps[-1].tool_result is not None
    assert chain.steps[-1].tool_result.error_code is ErrorCode.RATE_LIMITED
    assert chain.error_code is ErrorCode.RATE_LIMITED


async def test_max_iterations_ends_the_chain_with_max_iterations(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True, max_iterations=2)
    loop = Reply.tool_calls([ToolCall("calculator", {"expression": "1+1"})])
    fake_llm.script("agent-model", loop, loop)

    events, chain = await _run(runtime, AgentTask(input="loop forever"))

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.MAX_ITERATIONS
    assert "2 iterations" in failed.error_message
    assert chain.metrics.llm_calls == 2
    assert chain.status is ChainStatus.FAILED


async def test_an_llm_that_keeps_failing_ends_the_chain_with_llm_error_after_retries(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True, llm_max_attempts=2)
    fake_llm.script("agent-model", Reply.error(502, "bad gateway"), Reply.error(502, "bad gateway"))

    events, chain = await _run(runtime, AgentTask(input="anything"))

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.LLM_ERROR
    assert "after 2 attempt(s)" in failed.error_message
    result = chain.steps[-1].tool_result
    assert result is not None
    assert (result.attempts, [a.status_code for a in result.failed_attempts]) == (2, [502, 502])


async def test_a_non_retryable_llm_error_is_not_retried(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script("agent-model", Reply.error(400, "unsupported parameter"))

    events, chain = await _run(runtime, AgentTask(input="anything"))

    assert isinstance(events[-2], ChainFailedEvent)
    assert events[-2].error_code is ErrorCode.LLM_ERROR
    assert len(fake_llm.requests) == 1
    result = chain.steps[-1].tool_result
    assert result is not None
    assert result.attempts == 1


async def test_a_retryable_llm_error_is_retried_with_backoff_and_recorded(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(
        fake_llm, tmp_path, native=True, llm_initial_backoff_s=0.02, llm_max_backoff_s=0.03
    )
    fake_llm.script(
        "agent-model",
        Reply.error(429, "slow down"),
        Reply.error(503, "overloaded"),
        Reply.text("done", prompt_tokens=12, completion_tokens=3),
    )

    _, chain = await _run(runtime, AgentTask(input="anything"))

    result = chain.steps[1].tool_result
    assert result is not None
    assert result.success
    assert result.attempts == 3
    assert [(a.attempt, a.error_class, a.status_code) for a in result.failed_attempts] == [
        (1, "rate_limit", 429),
        (2, "transient", 503),
    ]
    backoffs = [a.backoff_s for a in result.failed_attempts]
    assert all(b is not None and 0 < b <= 0.03 for b in backoffs)
    assert result.duration_ms >= sum(b * 1000 for b in backoffs if b)
    assert result.cost_usd == _cost(12, 3)  # only the answered call costs


@pytest.mark.parametrize(
    ("failure", "error_class", "status_code"),
    [
        (Reply.error(500, "primary is down"), "transient", 500),
        (Reply.error(429, "primary is busy"), "rate_limit", 429),
        (Reply.text("too slow", delay_s=2.0), "timeout", 408),
    ],
    ids=["500", "429", "timeout"],
)
async def test_a_failing_deployment_falls_back_and_the_chain_shows_both(
    fake_llm: FakeLLMServer, tmp_path: Path, failure: Reply, error_class: str, status_code: int
) -> None:
    runtime = runtime_for(
        tmp_path,
        [
            fake_deployment(fake_llm, "primary", deployment_id="primary-a", timeout_s=0.3),
            fake_deployment(
                fake_llm,
                "backup",
                deployment_id="backup-b",
                input_cost="0.000001",
                output_cost="0.000001",
            ),
        ],
        fallbacks={"primary": ["backup"]},
        default_model="primary",
        tools=_tools(),
    )
    fake_llm.script("primary", failure)
    fake_llm.script(
        "backup", Reply.text("Final Answer: hello", prompt_tokens=9, completion_tokens=2)
    )

    _, chain = await _run(runtime, AgentTask(input="hi"))

    call, result = chain.steps[0].tool_call, chain.steps[1].tool_result
    assert call is not None
    assert result is not None
    assert call.model == "primary"
    assert (result.model, result.deployment, result.attempts) == ("backup", "backup-b", 1)
    [failure_seen] = result.failed_attempts
    assert (failure_seen.deployment, failure_seen.status_code, failure_seen.error_class) == (
        "primary-a",
        status_code,
        error_class,
    )
    assert result.cost_usd == Decimal("0.000011")
    assert chain.status is ChainStatus.COMPLETED


async def test_cancelling_during_a_slow_llm_call_stops_promptly_and_keeps_earlier_costs(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model",
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "1+1"})], prompt_tokens=30, completion_tokens=5
        ),
        Reply.text("never arrives", delay_s=30),
    )
    run = runtime.agent.start(AgentTask(input="slow"))
    stream = run.events()
    async with asyncio.timeout(5):
        await fake_llm.wait_for_requests(2)  # the slow call has reached the provider
    started = time.perf_counter()
    run.cancel()
    async with asyncio.timeout(2):
        events = [event async for event in stream]
    elapsed = time.perf_counter() - started

    assert elapsed < 0.5
    failed, done = events[-2], events[-1]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.CANCELLED
    assert isinstance(done, DoneEvent)
    assert done.final_state is TaskState.CANCELLED
    chain = run.chain
    assert chain.status is ChainStatus.CANCELLED
    last = chain.steps[-1].tool_result
    assert last is not None
    assert last.error_code is ErrorCode.CANCELLED
    assert chain.metrics.total_cost_usd == _cost(30, 5)
