"""Plugins: tools from the `omniforge.tools` entry points of installed packages and from the
modules OMNIFORGE_TOOL_MODULES names. The example package in `examples/` is installed into this
environment and found by `load_plugin_tools`, listed by `omniforge tools` and, in a service,
by `/api/v1/tools`, and used by a task. A broken plugin is a `PluginError` naming it, and makes
`omniforge serve` fail at start with that message."""

import asyncio
import fcntl
import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from app.chain import ReasoningChain
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.executor import ToolExecutor
from app.tools.plugins import ENTRY_POINT_GROUP, PluginError, load_plugin_tools
from app.tools.registry import ToolRegistry
from tests.api.helpers import stream, submit
from tests.api.tools import BUILTIN_TOOLS
from tests.factories import context_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, running_service, service_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "omniforge-example-tool"
EXAMPLE_DISTRIBUTION = "omniforge-example-tool"
TOOL_CLASS = """
from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput


class {cls}(BaseTool):
    def __init__(self, suffix: str = "") -> None:
        self._definition = ToolDefinition(
            name="{name}" + suffix, type=ToolType.CUSTOM, description="{name} tool"
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput("{name} ran")
"""


@pytest.fixture(scope="session")
def example_installed() -> None:
    """The example package, installed (editable) into this environment unless it is already,
    as a user installs it. One installer at a time across test workers."""
    lock_path = Path(sys.prefix) / ".omniforge-example-tool.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            importlib.metadata.distribution(EXAMPLE_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-e", EXAMPLE],
                check=True,
                timeout=600,
            )
            importlib.invalidate_caches()
    if importlib.util.find_spec("omniforge_example_tool") is None:
        # Installed after this process started: the .pth file that puts an editable package
        # on the path is read at start-up only (new processes read it).
        sys.path.append(str(EXAMPLE / "src"))


def _module(directory: Path, source: str) -> str:
    """A module file in `directory` (on sys.path) with `source`; its unique name."""
    name = f"plugin_{uuid4().hex[:10]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


def _tool_module(directory: Path, *classes: tuple[str, str], extra: str = "") -> str:
    source = "".join(TOOL_CLASS.format(cls=cls, name=name) for cls, name in classes)
    return _module(directory, source + textwrap.dedent(extra))


@pytest.fixture
def plugins_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _entry_points(directory: Path, entries: dict[str, str]) -> None:
    """An installed distribution (its metadata, as pip writes it) declaring `entries` in the
    `omniforge.tools` group; `directory` is on sys.path."""
    name = f"plugin_dist_{uuid4().hex[:8]}"
    info = directory / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    importlib.invalidate_caches()


def _names(tools: list[BaseTool]) -> list[str]:
    return [tool.definition.name for tool in tools]


def _plugin_error(modules: list[str]) -> str:
    with pytest.raises(PluginError) as caught:
        load_plugin_tools(modules)
    return str(caught.value)


# Modules ------------------------------------------------------------------------------------


def test_a_module_contributes_each_tool_class_it_defines(plugins_dir: Path) -> None:
    helper = """
    from app.tools.builtin.calculator import CalculatorTool  # imported, not defined here


    class NeedsConfig(Alpha):
        def __init__(self, endpoint: str) -> None:
            raise AssertionError("never constructed: it needs an argument")
    """
    name = _tool_module(plugins_dir, ("Alpha", "alpha"), ("Beta", "beta"), extra=helper)

    tools = load_plugin_tools([name])

    assert "alpha" in _names(tools)
    assert "beta" in _names(tools)
    assert "calculator" not in _names(tools)
    assert len(tools) == len(_names(load_plugin_tools([]))) + 2


def test_a_module_listed_twice_is_loaded_once(plugins_dir: Path) -> None:
    name = _tool_module(plugins_dir, ("Alpha", "alpha"))

    assert _names(load_plugin_tools([name, name])).count("alpha") == 1


def test_a_missing_module_is_named_with_the_cause(plugins_dir: Path) -> None:
    assert _plugin_error(["no_such_tools_module"]) == (
        "tool plugin module 'no_such_tools_module' (OMNIFORGE_TOOL_MODULES): cannot be "
        "imported: ModuleNotFoundError: No module named 'no_such_tools_module'"
    )


def test_a_module_that_fails_to_import_is_named_with_the_cause(plugins_dir: Path) -> None:
    name = _module(plugins_dir, "raise RuntimeError('the vendor SDK is not configured')\n")

    assert _plugin_error([name]) == (
        f"tool plugin module {name!r} (OMNIFORGE_TOOL_MODULES): cannot be imported: "
        "RuntimeError: the vendor SDK is not configured"
    )


def test_a_module_without_tools_is_refused(plugins_dir: Path) -> None:
    name = _module(plugins_dir, "VALUE = 1\n")

    assert _plugin_error([name]) == (
        f"tool plugin module {name!r} (OMNIFORGE_TOOL_MODULES): defines no BaseTool subclass "
        "that can be constructed without arguments"
    )


def test_a_constructor_that_raises_is_named_with_the_cause(plugins_dir: Path) -> None:
    broken = """
    class Broken(Alpha):
        def __init__(self) -> None:
            raise ValueError("API key missing")
    """
    name = _tool_module(plugins_dir, ("Alpha", "alpha"), extra=broken)

    assert _plugin_error([name]) == (
        f"tool plugin module {name!r} (OMNIFORGE_TOOL_MODULES): Broken() failed: "
        "ValueError: API key missing"
    )


@pytest.mark.parametrize("taken", ["calculator", "llm"])
def test_a_name_a_built_in_tool_has_is_refused(plugins_dir: Path, taken: str) -> None:
    name = _tool_module(plugins_dir, ("Impostor", taken))

    message = (
        f"tool plugin module {name!r} (OMNIFORGE_TOOL_MODULES): its tool {taken!r} "
        "clashes with a built-in tool"
    )
    assert _plugin_error([name]) == message
    # Names the caller reserves (its own tools) replace the built-ins; the LLM's stays.
    with pytest.raises(PluginError) as caught:
        load_plugin_tools([name], reserved=[taken] if taken != "llm" else [])
    assert str(caught.value) == message


def test_a_name_another_plugin_has_is_refused_naming_both(plugins_dir: Path) -> None:
    first = _tool_module(plugins_dir, ("Alpha", "shared"))
    second = _tool_module(plugins_dir, ("Other", "shared"))

    assert _plugin_error([first, second]) == (
        f"tool plugin module {second!r} (OMNIFORGE_TOOL_MODULES): its tool 'shared' clashes "
        f"with module {first!r} (OMNIFORGE_TOOL_MODULES)"
    )


# Entry points -------------------------------------------------------------------------------


def test_an_entry_point_may_name_a_class_or_a_callable_returning_tools(
    plugins_dir: Path,
) -> None:
    factory = """
    def make_tools():
        return [Alpha(suffix="_one"), Alpha(suffix="_two")]


    def make_tool():
        return Beta()
    """
    module = _tool_module(plugins_dir, ("Alpha", "alpha"), ("Beta", "beta"), extra=factory)
    _entry_points(
        plugins_dir,
        {
            "alpha": f"{module}:Alpha",
            "pair": f"{module}:make_tools",
            "single": f"{module}:make_tool",
        },
    )

    names = _names(load_plugin_tools([]))

    assert {"alpha", "alpha_one", "alpha_two", "beta"} <= set(names)


@pytest.mark.parametrize(
    ("target", "extra", "cause"),
    [
        ("missing_module_xyz:Tool", "", "cannot be imported: ModuleNotFoundError: No module"),
        ("{module}:NotATool", "class NotATool: ...", "NotATool is not a BaseTool subclass"),
        ("{module}:VALUE", "VALUE = 3", "names neither a BaseTool subclass nor a callable"),
        ("{module}:junk", "def junk():\n    return 'x'", "returned something other than a"),
        ("{module}:boom", "def boom():\n    raise OSError('no')", "calling it failed: OSError"),
    ],
)
def test_a_broken_entry_point_is_named_with_its_distribution_and_cause(
    plugins_dir: Path, target: str, extra: str, cause: str
) -> None:
    module = _tool_module(plugins_dir, ("Alpha", "alpha"), extra=extra)
    _entry_points(plugins_dir, {"broken": target.format(module=module)})

    message = _plugin_error([])

    assert message.startswith(f"tool plugin entry point 'broken' ({target.format(module=module)}")
    assert ", from plugin_dist_" in message
    assert cause in message


# The example package ------------------------------------------------------------------------


@pytest.mark.usefixtures("example_installed")
async def test_the_example_package_is_found_and_its_tool_works() -> None:
    [word_stats] = [t for t in load_plugin_tools([]) if t.definition.name == "word_stats"]
    chain = ReasoningChain(task_id="t", agent_id="a")
    executor = ToolExecutor(ToolRegistry([*builtin_tools(), word_stats]))

    result = await executor.execute(
        chain, context_for(chain), "word_stats", {"text": "The cat sat. The cat ran!", "top": 2}
    )

    assert type(word_stats).__module__ == "omniforge_example_tool"
    assert result.value == {
        "words": 6,
        "distinct_words": 4,
        "sentences": 2,
        "top_words": [["cat", 2], ["the", 2]],
    }


async def _omniforge(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNIFORGE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **env},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.usefixtures("example_installed")
async def test_omniforge_tools_lists_the_example_tool(tmp_path: Path) -> None:
    code, out, err = await _omniforge("tools", "--json", env={"OMNIFORGE_DATA_DIR": str(tmp_path)})

    assert code == 0, err
    specs = {spec["function"]["name"]: spec["function"] for spec in json.loads(out)}
    assert specs["word_stats"]["parameters"]["required"] == ["text"]


@pytest.mark.parametrize("command", ["serve", "tools", "run", "chat"])
async def test_a_broken_module_makes_the_command_fail_at_start_naming_it(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "broken_tools.py").write_text("import not_installed_sdk\n")
    env = {
        "OMNIFORGE_DATA_DIR": str(tmp_path / "data"),
        "OMNIFORGE_TOOL_MODULES": "broken_tools",
        "PYTHONPATH": str(tmp_path),
    }
    arguments = {
        "serve": ["serve", "--port", "0"],
        "tools": ["tools"],
        "run": ["run", "hi"],
        "chat": ["chat"],
    }

    code, out, err = await _omniforge(*arguments[command], env=env)

    assert code == 2
    assert out == ""
    assert err.strip() == (
        "omniforge: configuration error: tool plugin module 'broken_tools' "
        "(OMNIFORGE_TOOL_MODULES): cannot be imported: ModuleNotFoundError: No module named "
        "'not_installed_sdk'"
    )
    assert not (tmp_path / "data").exists()  # nothing was started or written


@pytest.mark.usefixtures("example_installed")
async def test_a_service_offers_the_example_tool_and_a_task_uses_it(
    tmp_path: Path, database_url: str, fake_llm: FakeLLMServer
) -> None:
    text = "Plugins are tools. Tools are plugins!"
    settings = service_settings(tmp_path, database_url, fake_llm)
    async with running_service(settings, fake_llm) as service:
        tenant = await service.create_tenant(
            f"p-{uuid4().hex[:10]}", enabled_tools=[*BUILTIN_TOOLS, "word_stats"]
        )
        fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("word_stats", {"text": text}, id="w1")]),
            Reply.text("Six words, three of them distinct."),
        )
        async with service.client(tenant) as client:
            listed = (await client.get("/api/v1/tools")).json()["items"]
            accepted = await submit(client, input="How many words?")
            events = await stream(client, accepted["task_id"])

    [tool] = [item for item in listed if item["name"] == "word_stats"]
    assert tool["usable"] is True
    steps: list[dict[str, Any]] = [e.json["step"] for e in events if e.event == "reasoning_step"]
    [call] = [s for s in steps if (s.get("tool_call") or {}).get("tool_name") == "word_stats"]
    assert call["tool_call"]["arguments"] == {"text": text}
    [result] = [
        s
        for s in steps
        if s["type"] == "tool_result"
        and s["tool_result"]["correlation_id"] == call["tool_call"]["correlation_id"]
    ]
    assert result["tool_result"]["success"] is True
    assert result["tool_result"]["result"] == {
        "words": 6,
        "distinct_words": 3,
        "sentences": 2,
        "top_words": [["are", 2], ["plugins", 2], ["tools", 2]],
    }
    assert events[-1].json["final_state"] == "completed"
