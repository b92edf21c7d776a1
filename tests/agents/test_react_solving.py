"""The ReAct agent end to end: fake provider over HTTP → the gateway (its direct path; the first
test through LiteLLM's Router too) → executor → chain → events. Tasks solved: the exact
steps, costs, requests and events of a run that completes."""

import json
from pathlib import Path

import pytest

from app.agents import AgentTask
from app.chain import (
    ChainCompletedEvent,
    ChainStartedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningStepEvent,
    TaskState,
    TaskStatusEvent,
)
from app.tools.models import OutputDelta
from tests.agents.react_helpers import (
    _assert_usage_and_cost,
    _cost,
    _llm_results,
    _run,
    _runtime,
    _shape,
    _tools,
)
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

TASK = "What is 17 * 23 + 4, and what time is it in Tokyo?"
FINAL = "17 * 23 + 4 = 395, and in Tokyo it is 21:00."


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
async def test_native_tool_calling_solves_a_two_tool_task_with_exact_steps_and_cost(
    fake_llm: FakeLLMServer, tmp_path: Path, direct: bool
) -> None:
    runtime = _runtime(fake_llm, tmp_path, native=True, llm_direct_http=direct)
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
        # (Both paths leave `content: null` off the wire, as LiteLLM does.)
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
