"""Tools as they go on the wire, serialised once per tool rather than once per call.

An agent offers the same tool definitions in every LLM call of every task (a tool's OpenAI form
is built once per definition: `ToolDefinition.to_openai_tool`), and its schemas are most of a
request's bytes when it offers many. Each tool object's JSON is kept here by identity, with the
object itself (so that its id is not reused), in a bounded cache: what the direct path sends
and the prompt counter's keys. A schema's regexes that Python cannot compile are dropped as
LiteLLM drops them (by LiteLLM, imported for it if need be); others are sent as they are.
"""

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

_MAX_TOOLS = 4096


@dataclass(frozen=True, slots=True)
class WireTool:
    """A tool's JSON as given (`key`), and as sent to an OpenAI-compatible server (`sent`:
    the regexes Python cannot compile dropped from its schema, as LiteLLM sends it)."""

    tool: dict[str, Any]
    key: str
    sent: str


_cache: OrderedDict[int, WireTool] = OrderedDict()
_lock = threading.Lock()  # loops in several threads (commands, tests) may share the cache


def wire_tool(tool: dict[str, Any]) -> WireTool:
    """The tool's JSON, computed once per tool object."""
    with _lock:
        entry = _cache.get(id(tool))
        if entry is not None and entry.tool is tool:
            _cache.move_to_end(id(tool))
            return entry
    key = json.dumps(tool, sort_keys=True, separators=(",", ":"))
    sent = key
    if _has_pattern(tool) and not _regexes_compile(tool):
        # LiteLLM drops what Python cannot compile (imported here if it is not yet).
        from app.llm.litellm_env import (
            drop_non_python_regex_patterns,
            tool_with_sanitized_parameters,
        )

        cleaned = tool_with_sanitized_parameters(tool, drop_non_python_regex_patterns)
        sent = json.dumps(cleaned, sort_keys=True, separators=(",", ":"))
    entry = WireTool(tool, key, sent)
    with _lock:
        _cache[id(tool)] = entry
        if len(_cache) > _MAX_TOOLS:
            _cache.popitem(last=False)
    return entry


def needs_litellm(tool: dict[str, Any]) -> bool:
    """Whether sending the tool would import LiteLLM: it is not yet cached, and a regex of
    its schema does not compile in Python."""
    with _lock:
        entry = _cache.get(id(tool))
        if entry is not None and entry.tool is tool:
            return False
    return _has_pattern(tool) and not _regexes_compile(tool)


def tools_json(tools: list[dict[str, Any]]) -> str:
    """The tools as sent, as one JSON array."""
    return "[" + ",".join(wire_tool(tool).sent for tool in tools) + "]"


def tools_key(tools: list[dict[str, Any]]) -> tuple[str, ...]:
    """A key that tells tool sets apart by content (hashes of cached strings: cheap)."""
    return tuple(wire_tool(tool).key for tool in tools)


def _has_pattern(value: Any) -> bool:
    if isinstance(value, dict):
        return (
            "pattern" in value
            or "patternProperties" in value
            or any(_has_pattern(v) for v in value.values() if isinstance(v, dict | list))
        )
    if isinstance(value, list):
        return any(_has_pattern(v) for v in value if isinstance(v, dict | list))
    return False


def _regexes_compile(value: Any) -> bool:
    """Whether every regex anywhere in the value (a `pattern` string, a `patternProperties`
    key) compiles in Python: then LiteLLM's clean-up, which drops only those that do not,
    changes nothing."""
    if isinstance(value, dict):
        pattern = value.get("pattern")
        if isinstance(pattern, str) and not _compiles(pattern):
            return False
        names = value.get("patternProperties")
        if isinstance(names, dict) and not all(_compiles(str(name)) for name in names):
            return False
        return all(_regexes_compile(v) for v in value.values() if isinstance(v, dict | list))
    if isinstance(value, list):
        return all(_regexes_compile(v) for v in value if isinstance(v, dict | list))
    return True


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError):
        return False
    return True
