"""The `omniforge` command, run as a user runs it: a subprocess of the installed entry point."""

import asyncio
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

from app.chain import (
    ChainCompletedEvent,
    DoneEvent,
    ReasoningStepEvent,
    chain_event_adapter,
    format_usd,
)
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall


async def _omniforge(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **(env or {})},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_run_on_the_embedded_default_answers_395_with_no_configuration() -> None:
    code, out, err = await _omniforge("run", "What is 17 * 23 + 4?")

    assert code == 0, err
    assert "final answer   17 * 23 + 4 = 395." in out
    assert "tool call      calculator" in out
    assert "Completed · 8 steps · 2 LLM calls · 1 other tool calls" in out


async def test_run_json_prints_every_event_as_a_json_line() -> None:
    code, out, _ = await _omniforge("run", "What time is it in Tokyo?", "--json")

    events = [chain_event_adapter.validate_json(line) for line in out.splitlines()]
    assert code == 0
    assert [e.type for e in events[:2]] == ["chain_started", "task_status"]
    assert isinstance(events[-2], ChainCompletedEvent)
    assert isinstance(events[-1], DoneEvent)
    tool_calls = [
        e.step.tool_call.tool_name
        for e in events
        if isinstance(e, ReasoningStepEvent) and e.step.tool_call is not None
    ]
    assert tool_calls == ["llm", "current_time", "llm"]


async def test_run_against_a_configured_model_over_http(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    path = write_model_list(
        tmp_path,
        [
            fake_deployment(
                fake_llm, "remote", input_cost="0.000001", output_cost="0.000002", native_tools=True
            )
        ],
    )
    fake_llm.script(
        "remote",
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "2**8"})],
            prompt_tokens=100,
            completion_tokens=10,
        ),
        Reply.text("256", prompt_tokens=150, completion_tokens=5),
    )
    code, out, err = await _omniforge(
        "run",
        "2 to the 8th?",
        env={
            "OMNIFORGE_MODELS_FILE": str(path),
            "OMNIFORGE_DEFAULT_MODEL": "remote",
            "FAKE_LLM_API_KEY": "k",
        },
    )

    assert code == 0, err
    assert "remote via remote#1 · 100 in / 10 out tokens · $0.00012" in out
    assert "final answer   256" in out
    total = Decimal("0.000001") * (100 + 150) + Decimal("0.000002") * (10 + 5)
    assert f"${format_usd(total)} · " in out


async def test_a_failed_run_exits_non_zero_with_the_error_code(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    path = write_model_list(tmp_path, [fake_deployment(fake_llm, "remote")])
    fake_llm.script("remote", Reply.error(401, "invalid api key"))
    code, out, _ = await _omniforge(
        "run",
        "hi",
        env={
            "OMNIFORGE_MODELS_FILE": str(path),
            "OMNIFORGE_DEFAULT_MODEL": "remote",
            "FAKE_LLM_API_KEY": "k",
        },
    )
    assert code == 1
    assert "Failed (llm_error)" in out


async def test_a_bad_model_list_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("model_list:\n  - model_name: x\n    litellm_params: {}\n")
    code, _, err = await _omniforge("run", "hi", env={"OMNIFORGE_MODELS_FILE": str(path)})
    assert code == 2
    assert "configuration error" in err
    assert "litellm_params.model is required" in err


async def test_tools_lists_every_tool_with_its_schema() -> None:
    code, out, _ = await _omniforge("tools", "--json")
    specs = json.loads(out)
    assert code == 0
    assert [s["function"]["name"] for s in specs] == ["calculator", "current_time", "llm"]
    assert specs[0]["function"]["parameters"]["required"] == ["expression"]
