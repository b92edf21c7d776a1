"""The `omniforge` commands that run no agent start without the agent runtime: neither LiteLLM
nor the OpenAI SDK nor MCP is imported (seconds of CPU each time), only what the command uses."""

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# Runs in a fresh interpreter: the command, then (as the last line of its stdout) the modules of
# the agent runtime it imported.
_PROBE = """
import json
import sys

from app.cli import main

try:
    code = main(sys.argv[1:])
except SystemExit as exited:  # `--help` exits from the parser
    code = exited.code
runtime = sorted(
    name
    for name in sys.modules
    if name.split(".")[0] in {"litellm", "openai", "mcp"}
    or name.startswith("app.agents")
    or name == "app.llm.gateway"
)
print(json.dumps(runtime))
sys.exit(code)
"""


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
    assert await _probe(_PROBE, args, tmp_path) == []


async def _probe(script: str, args: list[str], tmp_path: Path) -> Any:
    """Runs `script` with `args` in a fresh interpreter, on a fresh development install (the
    embedded SQLite database of `tmp_path`); what it printed last, as JSON."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, "OMNIFORGE_DATA_DIR": str(tmp_path)},
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
