"""The `omniforge` command, run as a user runs it: a subprocess of the installed entry point."""

import asyncio
import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from uuid import uuid4

from app.chain import (
    ChainCompletedEvent,
    DoneEvent,
    ReasoningStepEvent,
    chain_event_adapter,
    format_usd,
)
from app.security import TokenVerifier
from app.tools.builtin import builtin_tools
from app.tools.plugins import load_plugin_tools
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

STRONG_SECRET = "cli-test-secret-" + "k" * 40


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
    assert "Completed · 8 steps · 2 LLM calls · 1 other tool call · " in out


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


async def test_run_with_a_model_this_machine_lacks_says_whose_models_it_checked() -> None:
    """A fresh install knows the demo model alone; a model a team's service has (say
    `gpt-4o-mini`) is refused in process with where the list came from and where to go."""
    code, _, err = await _omniforge("run", "--model", "gpt-4o-mini", "hi")
    assert code == 2
    assert "default model 'gpt-4o-mini' is not in the model list (demo)" in err
    assert "OMNIFORGE_MODELS_FILE is unset" in err
    assert "a running service may have others: submit to it through its API" in err


async def test_tools_lists_every_tool_with_its_schema() -> None:
    code, out, _ = await _omniforge("tools", "--json")
    specs = json.loads(out)
    assert code == 0
    # The built-in tools, those of installed plugins (the example package), then the LLM.
    tools = [*builtin_tools(), *load_plugin_tools([])]
    assert [s["function"]["name"] for s in specs] == [t.definition.name for t in tools] + ["llm"]
    assert specs[0]["function"]["parameters"]["required"] == ["expression"]


async def test_run_on_the_demo_works_out_everyday_arithmetic_or_says_it_cannot() -> None:
    root, percent, zero = await asyncio.gather(
        _omniforge("run", "What is the square root of 2 times pi?"),
        _omniforge("run", "what is 15% of 80", "--json"),
        _omniforge("run", "What is 1 divided by 0?"),
    )

    assert root[0] == 0, root[2]
    assert "final answer   sqrt(2) * pi = 4.44288293815837." in root[1]
    events = [chain_event_adapter.validate_json(line) for line in percent[1].splitlines()]
    completed = events[-2]
    assert percent[0] == 0, percent[2]
    assert isinstance(completed, ChainCompletedEvent)
    assert completed.answer == "15 * 80 / 100 = 12."
    assert zero[0] == 0, zero[2]
    assert "FAILED tool_error: division by zero" in zero[1]
    assert (
        "final answer   I could not work out 1 / 0: the calculator tool reported division by zero."
        in zero[1]
    )


SHORT_SECRET = "k" * 31
CONFIGURATION_ERRORS: list[tuple[list[str], dict[str, str], str]] = [
    (
        ["serve"],
        {"OMNIFORGE_ENV": "production"},
        "OMNIFORGE_JWT_SECRET must be set to at least 32 bytes outside development",
    ),
    (
        ["serve"],
        {"OMNIFORGE_MAX_ITERATIONS": "lots"},
        "OMNIFORGE_MAX_ITERATIONS: Input should be a valid integer",
    ),
    (
        ["serve"],
        {"OMNIFORGE_DEFAULT_MODEL": "nosuch"},
        "default model 'nosuch' is not in the model list (demo)",
    ),
    (
        ["migrate"],
        {"OMNIFORGE_DATABASE_URL": "not a url"},
        "OMNIFORGE_DATABASE_URL cannot be used: Could not parse SQLAlchemy URL",
    ),
    (
        ["token", "--tenant", "default", "--sub", "me"],
        {"OMNIFORGE_JWT_SECRET": SHORT_SECRET},
        "OMNIFORGE_JWT_SECRET is shorter than 32 bytes",
    ),
    (
        ["tenant", "list"],
        {"OMNIFORGE_ENV": "staging"},
        "OMNIFORGE_ENV: Input should be 'development' or 'production'",
    ),
]


async def test_a_configuration_error_is_one_line_before_anything_is_touched(
    tmp_path: Path,
) -> None:
    """Each command checks the settings it uses first: one line on stderr, exit status 2, and
    no database migrated, no secret written (the data directory is never created)."""
    data_dirs = [tmp_path / f"data-{index}" for index in range(len(CONFIGURATION_ERRORS))]
    results = await asyncio.gather(
        *(
            _omniforge(*args, env={"OMNIFORGE_DATA_DIR": str(data_dir), **env})
            for (args, env, _), data_dir in zip(CONFIGURATION_ERRORS, data_dirs, strict=True)
        )
    )

    for (args, _, problem), (code, out, err), data_dir in zip(
        CONFIGURATION_ERRORS, results, data_dirs, strict=True
    ):
        assert code == 2, (args, err)
        assert err.startswith(f"omniforge: configuration error: {problem}"), (args, err)
        assert err.count("\n") == 1, (args, err)
        assert SHORT_SECRET not in err
        assert out == ""
        assert not data_dir.exists(), args


async def test_token_reads_no_database(tmp_path: Path) -> None:
    """A token is a signature: minted for any tenant id, with no database reached (here one
    that nothing serves). The service refuses it if its tenant is unknown or disabled."""
    tenant = f"cli-{uuid4().hex[:8]}"
    env = {
        "OMNIFORGE_DATA_DIR": str(tmp_path),
        "OMNIFORGE_DATABASE_URL": "postgresql+asyncpg://nobody@127.0.0.1:9/nowhere",
        "OMNIFORGE_JWT_SECRET": STRONG_SECRET,
    }

    code, out, err = await _omniforge("token", "--tenant", tenant, "--sub", "me", env=env)

    assert (code, err) == (0, "")
    principal = await TokenVerifier(STRONG_SECRET).verify(out.strip())
    assert (principal.tenant_id, principal.subject) == (tenant, "me")
    assert os.listdir(tmp_path) == []


async def test_token_for_the_default_tenant_works_on_a_fresh_development_install(
    tmp_path: Path,
) -> None:
    code, out, err = await _omniforge(
        "token", "--tenant", "default", "--sub", "me", env={"OMNIFORGE_DATA_DIR": str(tmp_path)}
    )

    assert code == 0, err
    secret = (tmp_path / "jwt-secret").read_text(encoding="utf-8").strip()
    assert (await TokenVerifier(secret).verify(out.strip())).tenant_id == "default"
    # The secret is made; no database is.
    assert os.listdir(tmp_path) == ["jwt-secret"]
