"""A turn's messages rebuilt from its stored steps: from runs of both tool-calling modes, from
runs that ended early, and without the compaction calls."""

import json
from typing import Any

from app.agents import AgentTask, ReActAgent
from app.agents.history import NO_RESULT, as_text_history, turn_messages
from app.chain import ChainStatus
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall


async def _steps(agent: ReActAgent, task: AgentTask) -> list[dict[str, Any]]:
    """The run's steps as the database hands them back."""
    run = agent.start(task)
    async for _ in run.events():
        pass
    chain = await run.wait()
    assert chain.status is ChainStatus.COMPLETED, chain.error_message
    return [json.loads(step.model_dump_json()) for step in chain.steps]


async def test_a_native_turn_is_what_the_model_saw_plus_its_answer(
    fake_llm: FakeLLMServer, tmp_path: Any
) -> None:
    runtime = runtime_for(
        tmp_path, [fake_deployment(fake_llm, "m", native_tools=True)], default_model="m"
    )
    fake_llm.script(
        "m",
        Reply.tool_calls(
            [
                ToolCall("calculator", {"expression": "6 * 7"}, id="a"),
                ToolCall("current_time", {"timezone": "UTC"}, id="b"),
            ],
            content="Two at once.",
        ),
        Reply.text("42, at noon."),
    )
    task = AgentTask(input="Compute and tell the time.")
    steps = await _steps(runtime.agent, task)

    messages = turn_messages({"input": "Compute and tell the time."}, steps)

    sent = fake_llm.requests[1].body["messages"]
    assert messages == [*sent[1:], {"role": "assistant", "content": "42, at noon."}]
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["a", "b"]


async def test_a_text_format_turn_gets_its_parsed_calls_as_tool_calls(
    fake_llm: FakeLLMServer, tmp_path: Any
) -> None:
    runtime = runtime_for(
        tmp_path, [fake_deployment(fake_llm, "t", native_tools=False)], default_model="t"
    )
    fake_llm.script(
        "t",
        Reply.text('Thought: compute\nAction: calculator\nAction Input: {"expression": "6 * 7"}'),
        Reply.text("Thought: done\nFinal Answer: 42"),
    )
    steps = await _steps(runtime.agent, AgentTask(input="6 * 7?"))

    messages = turn_messages({"input": "6 * 7?"}, steps)

    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]["tool_calls"][0]
    assert call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "6 * 7"}
    assert messages[2]["tool_call_id"] == call["id"]
    assert "42" in messages[2]["content"]
    assert messages[3] == {"role": "assistant", "content": "42"}
    # As a text-format model will be shown it in the next turn.
    assert as_text_history(messages) == [
        {"role": "user", "content": "6 * 7?"},
        {
            "role": "assistant",
            "content": f"Action: calculator\nAction Input: {call['function']['arguments']}",
        },
        {"role": "user", "content": f"Observation: {messages[2]['content']}"},
        {"role": "assistant", "content": "Final Answer: 42"},
    ]


def test_a_call_without_a_result_is_answered_and_compactions_are_left_out() -> None:
    llm, compaction, tool = "c-llm", "c-compact", "c-tool"
    steps: list[dict[str, Any]] = [
        {
            "type": "tool_call",
            "tool_call": {
                "tool_type": "llm",
                "correlation_id": compaction,
                "arguments": {"purpose": "compaction"},
            },
        },
        {
            "type": "tool_result",
            "tool_result": {
                "correlation_id": compaction,
                "success": True,
                "result": {"content": "summary"},
            },
        },
        {
            "type": "tool_call",
            "tool_call": {"tool_type": "llm", "correlation_id": llm, "arguments": {}},
        },
        {
            "id": "reply",
            "type": "tool_result",
            "tool_result": {
                "correlation_id": llm,
                "success": True,
                "result": {
                    "content": None,
                    "tool_calls": [{"id": "x", "name": "slow", "arguments": {}}],
                },
            },
        },
        {
            "type": "tool_call",
            "parent_step_id": "reply",
            "tool_call": {
                "tool_type": "custom",
                "tool_name": "slow",
                "correlation_id": tool,
                "arguments": {},
            },
        },
    ]

    messages = turn_messages({"messages": [{"role": "user", "content": "go"}]}, steps)

    assert messages == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "slow", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": NO_RESULT},
    ]
