"""The `omniforge` commands that run no agent start without the agent runtime: neither LiteLLM
nor the OpenAI SDK nor MCP is imported (seconds of CPU each time), only what the command uses;
`token`, which needs the signing key alone, reaches no database either."""

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from app.security import mint_token
from tests.cluster import Instance, free_port
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL
from tests.sse import collect

# Runs in a fresh interpreter: the command, then (as the last line of its stdout) the modules it
# imported.
_PROBE = """
import json
import sys

from app.cli import main

try:
    code = main(sys.argv[1:])
except SystemExit as exited:  # `--help` exits from the parser
    code = exited.code
print(json.dumps(sorted(sys.modules)))
sys.exit(code)
"""


def _agent_runtime(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if name.split(".")[0] in {"litellm", "openai", "mcp"}
        or name.startswith("app.agents")
        or name in {"app.llm.gateway", "app.llm.backend"}
    ]


def _storage(modules: list[str]) -> list[str]:
    """The database's modules: SQLAlchemy, Alembic, the drivers and ours above them."""
    return [
        name
        for name in modules
        if name.split(".")[0] in {"sqlalchemy", "alembic", "aiosqlite", "asyncpg"}
        or name.startswith(("app.storage", "app.governance"))
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["token", "--tenant", "default", "--sub", "me"],
        ["tenant", "list"],
        ["tenant", "create", "Acme"],
        ["migrate"],
        ["api-key", "create", "--tenant", "default", "--name", "ci"],
        ["secrets", "rotate"],
    ],
    ids=lambda args: " ".join(args),
)
async def test_a_command_without_agents_imports_no_agent_runtime(
    args: list[str], tmp_path: Path
) -> None:
    assert _agent_runtime(await _probe(_PROBE, args, tmp_path)) == []


@pytest.mark.parametrize(
    "args",
    [["--help"], ["token", "--tenant", "default", "--sub", "me"]],
    ids=lambda args: " ".join(args),
)
async def test_a_command_that_signs_imports_no_database(args: list[str], tmp_path: Path) -> None:
    """`token` is a signature with the service's key: no engine, no migration, no tenant."""
    assert _storage(await _probe(_PROBE, args, tmp_path)) == []


async def test_serve_checks_its_models_without_litellm(tmp_path: Path) -> None:
    """`serve`'s configuration check builds the runtime (its model list and tools) without
    loading LiteLLM or MCP: the service loads LiteLLM once it is ready, and MCP when a tenant's
    server is first reached."""
    modules = await _probe(_CHECK_PROBE, ["serve"], tmp_path)
    assert "app.agents.runtime" in modules  # the runtime was built
    assert [name for name in modules if name.split(".")[0] in {"litellm", "openai", "mcp"}] == []
    # Nor the A2A SDK's server side: the first A2A request imports it.
    assert "app.api.a2a.router" in modules
    assert [name for name in modules if name.startswith("a2a.server")] == []


async def test_a_run_through_litellm_with_tools_imports_no_mcp(tmp_path: Path) -> None:
    """LiteLLM looks for its proxy's MCP gateway tools in every call that offers tools, and
    imports the MCP SDK to do so; ours are function tools, so it is told not to look. The
    demo model's calls go through LiteLLM, its tools offered."""
    modules = await _probe(_PROBE, ["run", "What is 17 * 23 + 4?"], tmp_path)
    assert "litellm.main" in modules  # the calls went through LiteLLM
    assert [name for name in modules if name.split(".")[0] == "mcp"] == []


async def test_a_run_on_a_self_hosted_model_imports_neither_litellm_nor_the_openai_sdk(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """A model list of OpenAI-compatible servers' models that LiteLLM's map does not know (and
    the demo model, unused) is served without LiteLLM (about 160 MB): a run with a tool call
    between two model calls, counted, priced and recorded."""
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "17 * 23 + 4"})]),
        Reply.text("17 * 23 + 4 = 395."),
    )
    models = write_model_list(
        tmp_path,
        [
            fake_deployment(
                fake_llm, MODEL, input_cost="0.000001", output_cost="0.000002", native_tools=True
            )
        ],
    )
    modules = await _probe(
        _PROBE,
        ["run", "What is 17 * 23 + 4?"],
        tmp_path,
        OMNIFORGE_MODELS_FILE=str(models),
        OMNIFORGE_DEFAULT_MODEL=MODEL,
    )
    assert "app.llm.direct_backend" in modules  # the calls were made
    assert [name for name in modules if name.split(".")[0] in {"litellm", "openai"}] == []
    _, second = fake_llm.requests_for(MODEL)
    assert second.body["messages"][-1]["role"] == "tool"
    assert '"result": 395' in second.body["messages"][-1]["content"]


async def test_a_task_submitted_the_moment_serve_is_ready_completes(tmp_path: Path) -> None:
    """`serve` is ready (started, listening) while LiteLLM is still loading in the background:
    the task submitted then waits for it, and is answered by the demo model."""
    secret = "startup-test-secret-" + "k" * 40
    env = {"OMNIFORGE_DATA_DIR": str(tmp_path), "OMNIFORGE_JWT_SECRET": secret}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    instance = Instance("serve", free_port(), env)
    with patch.dict(os.environ, clean, clear=True):
        await instance.start()  # returns once it logged its start-up and its socket
    try:
        token = mint_token(secret, tenant_id="default", subject="me", roles=["member"])
        async with instance.client(token) as client:
            ready = await client.get("/readyz")
            async with client.stream(
                "POST",
                "/api/v1/tasks",
                json={"input": "What is 17 * 23 + 4?"},
                headers={"Accept": "text/event-stream"},
            ) as response:
                assert response.status_code == 200, await response.aread()
                events = await collect(response)
    finally:
        await instance.terminate()

    assert ready.status_code == 200, ready.text
    assert events[-1].event == "done"
    assert events[-1].json["final_state"] == "completed", instance.log
    completed = [event.json for event in events if event.event == "chain_completed"]
    assert "395" in completed[0]["answer"]


# Runs in a fresh interpreter: `serve`'s configuration check and the import of the app it
# serves, not the serving itself; then the modules imported.
_CHECK_PROBE = """
import argparse
import json
import sys

from app.cli.configuration import configured

configured(argparse.Namespace(command=sys.argv[1], host="127.0.0.1", port=0))
import app.api

print(json.dumps(sorted(sys.modules)))
"""


async def _probe(script: str, args: list[str], tmp_path: Path, **env: str) -> Any:
    """Runs `script` with `args` in a fresh interpreter, on a fresh development install (the
    embedded SQLite database of `tmp_path`) and `env`; what it printed last, as JSON."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, "OMNIFORGE_DATA_DIR": str(tmp_path), **env},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().splitlines()[-1])


# Runs in a fresh interpreter: a command that builds the agent runtime, called as the program
# (`main()`) or by code with its own arguments, then whether the collector runs again and how
# many objects were left frozen.
_COLLECTOR_PROBE = """
import gc
import json
import sys

from app.cli import main

how, arguments = sys.argv[1], sys.argv[2:]
if how == "program":
    sys.argv = ["omniforge", *arguments]
    code = main()
else:
    code = main(arguments)
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
sys.exit(code)
"""


async def _collector_after(how: str, tmp_path: Path) -> dict[str, Any]:
    collector: dict[str, Any] = await _probe(_COLLECTOR_PROBE, [how, "models"], tmp_path)
    return collector


async def test_start_up_runs_with_the_collector_paused_and_leaves_what_it_built_frozen(
    tmp_path: Path,
) -> None:
    """The runtime's import and build (LiteLLM's included) make objects that live as long as
    the process: frozen, later collections skip them, and the collector is on again after."""
    collector = await _collector_after("program", tmp_path)
    assert collector["enabled"] is True
    assert collector["frozen"] > 100_000  # the runtime's modules, classes and tables


async def test_code_calling_the_cli_with_its_own_arguments_keeps_its_collector_as_it_was(
    tmp_path: Path,
) -> None:
    """A test (or a tool) running a command in its own process freezes nothing of its own."""
    assert await _collector_after("code", tmp_path) == {"enabled": True, "frozen": 0}
