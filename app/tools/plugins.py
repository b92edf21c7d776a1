"""Tools from outside the project: the `omniforge.tools` entry points of installed packages
and the modules `OMNIFORGE_TOOL_MODULES` names.

An entry point names a `BaseTool` subclass (constructed without arguments) or a callable that
returns a tool or a list of tools. A module contributes every `BaseTool` subclass it defines
itself that can be constructed without arguments. A plugin that cannot be loaded stops the
process from starting, with a message naming it: a service that silently lacks a tool its
agents were written for fails later and worse.
"""

import importlib
import importlib.metadata
import inspect
import logging
from collections.abc import Iterable, Sequence
from types import ModuleType

from app.errors import OmniForgeError
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.models import ToolDefinition

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "omniforge.tools"


class PluginError(OmniForgeError):
    """A plugin that cannot be used. `source` names it (its entry point or module)."""

    def __init__(self, source: str, cause: str) -> None:
        super().__init__(f"tool plugin {source}: {cause}")
        self.source = source


def load_plugin_tools(
    modules: Sequence[str], *, reserved: Iterable[str] | None = None
) -> list[BaseTool]:
    """The tools of every installed entry point, then of `modules`, constructed.

    `reserved` are the names taken already (default: the built-in tools'; the LLM tool's
    always). Raises
    `PluginError` for the first broken plugin: it cannot be imported, names no tool, its
    constructor raises, or its tool's name is taken. The same class reached twice (an entry
    point whose module is also listed) is loaded once.
    """
    taken = [*(_builtin_names() if reserved is None else reserved), LLM_TOOL_NAME]
    owners = dict.fromkeys(taken, "a built-in tool")
    loaded: dict[str, BaseTool] = {}
    for source, tools in _discovered(modules):
        for tool in tools:
            name = _checked_name(tool, source)
            if name in loaded and type(loaded[name]) is type(tool):
                continue
            if name in owners:
                raise PluginError(source, f"its tool {name!r} clashes with {owners[name]}")
            owners[name] = source
            loaded[name] = tool
            logger.info("tool %s loaded from %s", name, source)
    return list(loaded.values())


def _discovered(modules: Sequence[str]) -> Iterable[tuple[str, list[BaseTool]]]:
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {entry.name!r} ({entry.value}"
        if entry.dist is not None:
            source += f", from {entry.dist.name} {entry.dist.version}"
        source += ")"
        yield source, _from_entry_point(entry, source)
    for name in modules:
        source = f"module {name!r} (OMNIFORGE_TOOL_MODULES)"
        yield source, _from_module(_imported(name, source), source)


def _from_entry_point(entry: importlib.metadata.EntryPoint, source: str) -> list[BaseTool]:
    try:
        target = entry.load()
    except Exception as exc:
        raise PluginError(source, f"cannot be imported: {_describe(exc)}") from exc
    if isinstance(target, type):
        if not issubclass(target, BaseTool):
            raise PluginError(source, f"{target.__qualname__} is not a BaseTool subclass")
        return [_constructed(target, source)]
    if not callable(target):
        raise PluginError(source, "names neither a BaseTool subclass nor a callable")
    try:
        made = target()
    except Exception as exc:
        raise PluginError(source, f"calling it failed: {_describe(exc)}") from exc
    tools = [made] if isinstance(made, BaseTool) else made
    if not isinstance(tools, list | tuple) or not all(isinstance(t, BaseTool) for t in tools):
        raise PluginError(source, "returned something other than a tool or a list of tools")
    return list(tools)


def _imported(name: str, source: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as exc:
        raise PluginError(source, f"cannot be imported: {_describe(exc)}") from exc


def _from_module(module: ModuleType, source: str) -> list[BaseTool]:
    classes = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, BaseTool)
        and value.__module__ == module.__name__
        and not inspect.isabstract(value)
        and _needs_no_arguments(value)
    ]
    if not classes:
        raise PluginError(
            source, "defines no BaseTool subclass that can be constructed without arguments"
        )
    return [_constructed(cls, source) for cls in classes]


def _needs_no_arguments(cls: type) -> bool:
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: try it
        return True
    optional = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return all(p.default is not p.empty or p.kind in optional for p in parameters)


def _constructed(cls: type[BaseTool], source: str) -> BaseTool:
    try:
        return cls()
    except Exception as exc:
        raise PluginError(source, f"{cls.__qualname__}() failed: {_describe(exc)}") from exc


def _checked_name(tool: BaseTool, source: str) -> str:
    try:
        definition = tool.definition
    except Exception as exc:
        raise PluginError(source, f"its definition failed: {_describe(exc)}") from exc
    if not isinstance(definition, ToolDefinition):
        raise PluginError(source, f"{type(tool).__qualname__}.definition is not a ToolDefinition")
    return definition.name


def _builtin_names() -> list[str]:
    return [tool.definition.name for tool in builtin_tools()]


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
