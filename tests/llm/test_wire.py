"""Tools serialised once per tool object, and what is sent from that."""

import json
import threading
from typing import Any

from app.llm.wire import tools_json, tools_key, wire_tool


def _tool(name: str, **properties: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_a_tool_is_serialised_once_and_sent_as_itself() -> None:
    tool = _tool("lookup", word={"type": "string"})

    first = wire_tool(tool)

    assert wire_tool(tool) is first
    assert json.loads(tools_json([tool, tool])) == [tool, tool]


def test_an_equal_tool_of_its_own_has_the_same_key_and_a_changed_one_another() -> None:
    tool = _tool("lookup", word={"type": "string"})
    twin = _tool("lookup", word={"type": "string"})
    other = _tool("lookup", word={"type": "integer"})

    assert tools_key([tool]) == tools_key([twin])
    assert tools_key([tool]) != tools_key([other])
    assert tools_key([tool, other]) != tools_key([other, tool])


def test_regexes_python_cannot_compile_are_dropped_from_what_is_sent_only() -> None:
    tool = _tool("lookup", word={"type": "string", "pattern": "^\\p{L}+$"})

    [sent] = json.loads(tools_json([tool]))

    assert sent["function"]["parameters"]["properties"]["word"] == {"type": "string"}
    assert tool["function"]["parameters"]["properties"]["word"]["pattern"] == "^\\p{L}+$"
    assert "\\\\p{L}" in wire_tool(tool).key


def test_threads_share_the_cache_safely() -> None:
    tools = [_tool(f"t{i}", x={"type": "string"}) for i in range(200)]
    failures: list[BaseException] = []

    def serialise() -> None:
        try:
            for _ in range(20):
                assert json.loads(tools_json(tools)) == tools
        except BaseException as exc:  # reported below, not lost in the thread
            failures.append(exc)

    threads = [threading.Thread(target=serialise) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_what_is_sent_is_what_litellm_sends_whether_or_not_it_cleans_anything() -> None:
    """Where every regex compiles the tool goes as it is, without LiteLLM's walk; where one
    does not, LiteLLM's clean-up is applied: both as LiteLLM sends the tool."""
    from app.llm.litellm_env import drop_non_python_regex_patterns, tool_with_sanitized_parameters

    tools = [
        _tool("plain", word={"type": "string", "pattern": "^[a-z]+$"}),
        _tool("data", word={"type": "string", "default": "x", "examples": [{"pattern": "(?<"}]}),
        _tool("keys", tags={"type": "object", "patternProperties": {"^x-": {"type": "string"}}}),
        _tool(
            "foreign_key",
            tags={
                "type": "object",
                "patternProperties": {"^\\p{L}$": {"type": "string"}},
                "additionalProperties": False,
            },
        ),
        _tool("nested", items={"type": "array", "items": {"type": "string", "pattern": "[("}}),
    ]
    for tool in tools:
        cleaned = tool_with_sanitized_parameters(tool, drop_non_python_regex_patterns)
        expected = json.dumps(cleaned, sort_keys=True, separators=(",", ":"))
        assert wire_tool(tool).sent == expected, tool["function"]["name"]
