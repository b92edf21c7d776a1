"""`omniforge chat` and `omniforge run --agent`, run as a user runs them: subprocesses of the
entry point, the chat fed on its standard input."""

import asyncio
import os
import sys
from pathlib import Path

from app.agents.compaction import SUMMARY_PROMPT
from app.chain.models import utc_now
from app.llm.demo_brain import PLAIN_ANSWER
from app.resources.agents.store import AgentRepository
from app.runs.agents import AgentDefinition, definition_document
from app.storage import Database, upgrade_to_head
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall


def _environment(tmp_path: Path, fake_llm: FakeLLMServer) -> dict[str, str]:
    models = write_model_list(
        tmp_path,
        [
            fake_deployment(
                fake_llm, "remote", input_cost="0.000001", output_cost="0.000002", native_tools=True
            )
        ],
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    return {
        **clean,
        "OMNIFORGE_DATA_DIR": str(tmp_path),
        "OMNIFORGE_MODELS_FILE": str(models),
        "OMNIFORGE_DEFAULT_MODEL": "remote",
        "FAKE_LLM_API_KEY": "k",
    }


async def _define(tmp_path: Path, **definitions: AgentDefinition) -> None:
    """Agents of the default tenant, stored where the commands will find them."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'omniforge.db'}")
    try:
        await upgrade_to_head(database)
        async with database.transaction() as connection:
            agents = AgentRepository(connection, "default")
            for name, definition in definitions.items():
                document = definition_document(definition)
                await agents.create(name, document, by="test", at=utc_now())
    finally:
        await database.dispose()


async def _omniforge(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    async with asyncio.timeout(90):
        out, err = await process.communicate(None if stdin is None else stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_chat_holds_a_two_turn_conversation_on_its_standard_input(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        "remote",
        Reply.tool_calls([ToolCall("calculator", {"expression": "2 + 2"})]),
        Reply.text("It is 4."),
        Reply.text("Doubled, 8."),
    )
    env = _environment(tmp_path, fake_llm)

    code, out, err = await _omniforge("chat", env=env, stdin="What is 2 + 2?\n\nAnd doubled?\n")

    assert code == 0, err
    assert "OmniForge chat · agent default" in out
    assert "→ calculator" in out
    assert "agent> It is 4." in out
    assert "agent> Doubled, 8." in out
    assert out.index("agent> It is 4.") < out.index("agent> Doubled, 8.")
    # The second turn was sent the first, its tool call included.
    second = fake_llm.requests[-1].body["messages"]
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert second[1]["content"] == "What is 2 + 2?"
    assert second[-1]["content"] == "And doubled?"
    # Its output was streamed: the model was asked to stream, and the text typed in live, whole,
    # though the run was under way before the turn's stream was opened.
    assert all(r.body.get("stream") is True for r in fake_llm.requests)
    assert out.count("It is 4.") == 1
    assert out.count("Doubled, 8.") == 1
    assert "(2 LLM calls · " in out
    assert "(1 LLM call · " in out
    assert SUMMARY_PROMPT not in str(second)


async def test_chat_on_the_demo_model_prints_each_answer_once_and_counts_in_the_singular(
    tmp_path: Path,
) -> None:
    """A fresh install: no model list, the demo model answers, its reply typed in once."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    env = {**clean, "OMNIFORGE_DATA_DIR": str(tmp_path)}

    code, out, err = await _omniforge("chat", env=env, stdin="Hello\nWhat is 6*7?\n")

    assert code == 0, err
    assert out.count(PLAIN_ANSWER) == 1
    assert f"agent> {PLAIN_ANSWER}\n" in out
    assert out.count("6 * 7 = 42.") == 1
    assert "agent> 6 * 7 = 42.\n" in out
    assert "(1 LLM call · " in out
    assert "(2 LLM calls · " in out
    assert "1 LLM calls" not in out


async def test_chat_with_a_strategy_shows_its_records_on_the_demo_model(tmp_path: Path) -> None:
    """`--kind auto` on a fresh install: each turn states the complexity it scored and the
    strategy it chose, named, before the answer."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    env = {**clean, "OMNIFORGE_DATA_DIR": str(tmp_path)}

    code, out, err = await _omniforge("chat", "--kind", "auto", env=env, stdin="What is 6*7?\n")

    assert code == 0, err
    assert "· [complexity] Task complexity 0.70 (model)" in out
    assert "· [strategy] Strategy react: complexity 0.70 maps to react" in out
    assert "agent> 6 * 7 = 42.\n" in out
    assert out.index("[complexity]") < out.index("[strategy]") < out.index("agent> 6 * 7")


async def test_run_with_an_agent_uses_its_instructions(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    env = _environment(tmp_path, fake_llm)
    await _define(tmp_path, french=AgentDefinition(instructions="You answer in French.", tools=[]))
    fake_llm.script("remote", Reply.text("Quatre."))

    code, out, err = await _omniforge("run", "2 + 2?", "--agent", "french", env=env)
    missing, _, missing_err = await _omniforge("run", "2 + 2?", "--agent", "nobody", env=env)

    assert code == 0, err
    assert "agent french@1" in out
    assert "final answer   Quatre." in out
    sent = fake_llm.requests[0].body
    assert sent["messages"][0] == {"role": "system", "content": "You answer in French."}
    assert "tools" not in sent
    assert missing == 1
    assert "nobody" in missing_err


async def test_chat_shows_a_sub_agents_steps_indented_under_its_call_and_only_the_answer(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    env = _environment(tmp_path, fake_llm)
    await _define(
        tmp_path,
        helper=AgentDefinition(tools=["calculator"]),
        lead=AgentDefinition(tools=["agent:helper"]),
    )
    fake_llm.script(
        "remote",
        Reply.tool_calls([ToolCall("agent__helper", {"task": "Compute 2 + 2."})]),
        Reply.tool_calls([ToolCall("calculator", {"expression": "2 + 2"})]),
        Reply.text("The helper's answer: 4."),
        Reply.text("It is 4."),
    )

    code, out, err = await _omniforge("chat", "--agent", "lead", env=env, stdin="2 + 2?\n")

    assert code == 0, err
    lines = out.splitlines()
    [call] = [line for line in lines if "→ agent__helper" in line]
    [child_call] = [line for line in lines if "→ calculator" in line]
    # (the prompt `you> ` may lead the first line: the chat's input is not echoed)
    assert call.removeprefix("you> ").startswith("  → ")
    assert child_call.startswith("    → ")
    assert lines.index(call) < lines.index(child_call)
    # the sub-agent's answer is its parent's observation, not the chat's answer
    assert [line for line in lines if line.startswith("agent>")] == ["agent> It is 4."]
