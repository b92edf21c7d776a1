"""The ReAct agent end to end: fake provider over HTTP → LiteLLM → executor → chain → events."""

import asyncio
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentTask
from app.chain import (
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStartedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    ReasoningStepEvent,
    TaskState,
    TaskStatusEvent,
    ToolResultInfo,
)
from app.tools.base import BaseTool
from app.tools.builtin import CalculatorTool, CurrentTimeTool
from app.tools.errors import GuardRejection
from app.tools.guards import PendingCall
from app.tools.models import OutputDelta, ToolCallContext, ToolDefinition, ToolOutput
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

IN_PRICE, OUT_PRICE = Decimal("0.0000025"), Decimal("0.00001")
NOON_UTC = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
TASK = "What is 17 * 23 + 4, and what time is it in Tokyo?"


def _tools() -> list[BaseTool]:
    return [CalculatorTool(), CurrentTimeTool(clock=lambda: NOON_UTC)]


def _runtime(
    server: FakeLLMServer,
    tmp_path: Path,
    *,
    native: bool,
    tools: Sequence[BaseTool] | None = None,
    **options: Any,
) -> AgentRuntime:
    deployment = fake_deployment(
        server,
        "agent-model",
        input_cost=str(IN_PRICE),
        output_cost=str(OUT_PRICE),
        native_tools=native,
        deployment_id="agent-dep",
    )
    options.setdefault("llm_initial_backoff_s", 0.01)
    return runtime_for(
        tmp_path,
        [deployment],
        default_model="agent-model",
        tools=_tools() if tools is None else tools,
        **options,
    )


async def _run(runtime: AgentRuntime, task: AgentTask) -> tuple[list[ChainEvent], ReasoningChain]:
    run = runtime.agent.start(task)
    events = [event async for event in run.events()]
    return events, run.chain


def _shape(chain: ReasoningChain) -> list[tuple[str, str]]:
    """Each step as (type, tool name or text)."""
    shape = []
    for step in chain.steps:
        if step.tool_call is not None:
            shape.append((step.type.value, step.tool_call.tool_name))
        elif step.tool_result is not None:
            call = chain.step_by_correlation_id(step.tool_result.correlation_id)
            assert call is not None
            assert call.tool_call is not None
            shape.append((step.type.value, call.tool_call.tool_name))
        elif step.thinking is not None:
            shape.append((step.type.value, step.thinking.thought))
        else:
            assert step.synthesis is not None
            shape.append((step.type.value, step.synthesis.conclusion))
    return shape


def _llm_results(chain: ReasoningChain) -> list[ToolResultInfo]:
    return [
        s.tool_result
        for s in chain.steps
        if s.tool_result is not None and s.tool_result.model is not None
    ]


def _cost(input_tokens: int, output_tokens: int) -> Decimal:
    return IN_PRICE * input_tokens + OUT_PRICE * output_tokens


def _assert_usage_and_cost(
    chain: ReasoningChain, usage: list[tuple[int, int]]
) -> list[ToolResultInfo]:
    """Each LLM call reports the scripted tokens and costs exactly their price; so does the
    chain in total."""
    llm = _llm_results(chain)
    assert [(r.input_tokens, r.output_tokens) for r in llm] == usage
    assert [r.cost_usd for r in llm] == [_cost(*u) for u in usage]
    assert chain.metrics.total_cost_usd == sum(_cost(*u) for u in usage)
    return llm


FINAL = "17 * 23 + 4 = 395, and in Tokyo it is 21:00."


async def test_native_tool_calling_solves_a_two_tool_task_with_exact_steps_and_cost(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model",
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            content="First the arithmetic.",
            prompt_tokens=310,
            completion_tokens=22,
        ),
        Reply.tool_calls(
            [ToolCall("current_time", {"timezone": "Asia/Tokyo"}, id="c2")],
            prompt_tokens=362,
            completion_tokens=17,
        ),
        Reply.text(FINAL, prompt_tokens=420, completion_tokens=31),
    )

    events, chain = await _run(runtime, AgentTask(input=TASK))

    assert _shape(chain) == [
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("thinking", "First the arithmetic."),
        ("tool_call", "calculator"),
        ("tool_result", "calculator"),
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("tool_call", "current_time"),
        ("tool_result", "current_time"),
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("synthesis", FINAL),
    ]
    usage = [(310, 22), (362, 17), (420, 31)]
    llm = _assert_usage_and_cost(chain, usage)
    assert {(r.model, r.deployment, r.provider) for r in llm} == {
        ("agent-model", "agent-dep", "openai")
    }
    assert chain.metrics.total_cost_usd == sum(_cost(*u) for u in usage)
    assert chain.metrics.total_tokens == sum(a + b for a, b in usage)
    assert (chain.metrics.llm_calls, chain.metrics.tool_calls) == (3, 5)
    calculator = chain.steps[4].tool_result
    assert calculator is not None
    assert calculator.result == {"expression": "17 * 23 + 4", "result": 395}
    clock = chain.steps[8].tool_result
    assert clock is not None
    assert clock.result["local_time"] == "2026-07-01 21:00:00"
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.sources == [chain.steps[4].id, chain.steps[8].id, chain.steps[10].id]
    assert chain.status is ChainStatus.COMPLETED
    assert isinstance(events[-2], ChainCompletedEvent)

    first, second, third = (r.body for r in fake_llm.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["calculator", "current_time"]
    assert second["messages"][-2]["tool_calls"][0]["function"] == {
        "name": "calculator",
        "arguments": json.dumps({"expression": "17 * 23 + 4"}),
    }
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"expression": "17 * 23 + 4", "result": 395}),
    }
    assert third["messages"][-1]["tool_call_id"] == "c2"

    # Each LLM call records only the messages added since the previous one, and expands back
    # to exactly what was sent.
    calls = [chain.steps[0], chain.steps[5], chain.steps[9]]
    assert [c.tool_call.arguments.get("history") for c in calls if c.tool_call] == [
        None,
        {"step": 1, "messages": 2},
        {"step": 6, "messages": 4},
    ]
    assert [len(c.tool_call.arguments["messages"]) for c in calls if c.tool_call] == [2, 2, 2]
    for step, sent in zip(calls, (first, second, third), strict=True):
        # (LiteLLM leaves `content: null` off the wire.)
        recorded = [{k: v for k, v in m.items() if v is not None} for m in chain.llm_messages(step)]
        assert recorded == sent["messages"]


async def test_text_react_mode_solves_the_same_task_with_exact_steps_and_cost(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=False)
    fake_llm.script(
        "agent-model",
        Reply.text(
            "Thought: I should compute first.\nAction: calculator\n"
            'Action Input: {"expression": "17 * 23 + 4"}',
            prompt_tokens=500,
            completion_tokens=30,
        ),
        Reply.text(
            "Thought: Now the time.\nAction: current_time\nAction Input: ```json\n"
            '{"timezone": "Asia/Tokyo"}\n```',
            prompt_tokens=560,
            completion_tokens=28,
        ),
        Reply.text(
            f"Thought: I know both.\nFinal Answer: {FINAL}", prompt_tokens=610, completion_tokens=25
        ),
    )

    _, chain = await _run(runtime, AgentTask(input=TASK))

    assert _shape(chain) == [
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("thinking", "I should compute first."),
        ("tool_call", "calculator"),
        ("tool_result", "calculator"),
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("thinking", "Now the time."),
        ("tool_call", "current_time"),
        ("tool_result", "current_time"),
        ("tool_call", "llm"),
        ("tool_result", "llm"),
        ("thinking", "I know both."),
        ("synthesis", FINAL),
    ]
    _assert_usage_and_cost(chain, [(500, 30), (560, 28), (610, 25)])

    first, second, _ = (r.body for r in fake_llm.requests)
    assert "tools" not in first  # text mode: the tools are described in the prompt
    system = first["messages"][0]["content"]
    assert "calculator:" in system
    assert "current_time:" in system
    assert "Action Input:" in system
    assert first["stop"] == ["\nObservation:"]
    assert second["messages"][-1] == {
        "role": "user",
        "content": "Observation: " + json.dumps({"expression": "17 * 23 + 4", "result": 395}),
    }


async def test_parallel_tool_calls_run_in_one_batch(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model",
        Reply.tool_calls(
            [
                ToolCall("calculator", {"expression": "2 ** 10"}, id="a"),
                ToolCall("current_time", {"timezone": "UTC"}, id="b"),
            ]
        ),
        Reply.text("1024 at noon"),
    )

    _, chain = await _run(runtime, AgentTask(input="2**10 and the time"))

    assert _shape(chain)[2:6] == [
        ("tool_call", "calculator"),
        ("tool_call", "current_time"),
        ("tool_result", "calculator"),
        ("tool_result", "current_time"),
    ]
    tool_messages = fake_llm.requests[1].body["messages"][-2:]
    assert [m["tool_call_id"] for m in tool_messages] == ["a", "b"]


class ExplodingTool(BaseTool):
    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name="explode", type="external", description="always fails")

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        raise ConnectionResetError("peer reset the connection")


class StuckTool(BaseTool):
    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name="stuck", type="external", description="hangs", timeout_s=0.05)

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


async def test_an_unpriced_model_records_null_costs_and_counts_unpriced_calls(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = runtime_for(
        tmp_path,
        [fake_deployment(fake_llm, "mystery-model-7b", native_tools=True)],
        default_model="mystery-model-7b",
        tools=_tools(),
    )
    fake_llm.script(
        "mystery-model-7b",
        Reply.tool_calls([ToolCall("calculator", {"expression": "1+1"})]),
        Reply.text("2"),
    )

    events, chain = await _run(runtime, AgentTask(input="1+1"))

    llm = _llm_results(chain)
    assert [(r.cost_usd, r.unpriced) for r in llm] == [(None, True), (None, True)]
    assert chain.metrics.unpriced_calls == 2
    assert chain.metrics.total_cost_usd == 0
    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent)
    assert completed.model_dump(mode="json")["metrics"]["unpriced_calls"] == 2


async def test_events_arrive_in_protocol_order_with_running_metrics(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model",
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6*7"})], prompt_tokens=10, completion_tokens=1
        ),
        Reply.text("42", prompt_tokens=20, completion_tokens=2),
    )

    events, chain = await _run(runtime, AgentTask(input="6*7", id="task-42"))

    assert isinstance(events[0], ChainStartedEvent)
    assert isinstance(events[1], TaskStatusEvent)
    assert events[1].state is TaskState.WORKING
    steps = [e for e in events if isinstance(e, ReasoningStepEvent)]
    assert events[2 : 2 + len(steps)] == steps
    assert [e.step.step_number for e in steps] == list(range(1, len(chain.steps) + 1))
    assert [e.step for e in steps] == chain.steps
    assert [e.metrics.total_steps for e in steps] == list(range(1, len(steps) + 1))
    assert [e.metrics.total_tokens for e in steps] == [0, 11, 11, 11, 11, 33, 33]
    assert isinstance(events[-2], ChainCompletedEvent)
    assert events[-2].metrics == chain.metrics
    assert isinstance(events[-1], DoneEvent)
    assert {e.task_id for e in events} == {"task-42"}
    assert {e.chain_id for e in events} == {chain.id}


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


async def test_streamed_model_output_reaches_the_delta_callback(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model", Reply.text("The answer is forty two.", prompt_tokens=7, completion_tokens=6)
    )
    deltas: list[OutputDelta] = []

    run = runtime.agent.start(AgentTask(input="?"), on_delta=deltas.append)
    events = [event async for event in run.events()]

    assert "".join(delta.text for delta in deltas) == "The answer is forty two."
    assert len(deltas) > 1
    assert fake_llm.requests[0].body["stream"] is True
    call, result = run.chain.steps[0], run.chain.steps[1].tool_result
    assert result is not None
    assert {(d.step_id, d.correlation_id, d.kind) for d in deltas} == {
        (call.id, result.correlation_id, "content")
    }
    # After chain_started, task_status and the call's step: its place in the run's stream.
    assert {delta.after for delta in deltas} == {3}
    assert result.cost_usd == _cost(7, 6)
    assert isinstance(events[-1], DoneEvent)


async def test_a_task_limited_to_some_tools_offers_only_those(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True)
    fake_llm.script(
        "agent-model",
        Reply.tool_calls([ToolCall("current_time", {"timezone": "UTC"})]),
        Reply.text("cannot tell the time"),
    )

    _, chain = await _run(runtime, AgentTask(input="time?", tools=["calculator"]))

    offered = fake_llm.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["calculator"]
    refused = chain.steps[3].tool_result
    assert refused is not None
    assert refused.error_code is ErrorCode.UNKNOWN_TOOL
