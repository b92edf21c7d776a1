"""Discovery: a listing's tools are checked, named `<server>__<tool>` within 64 safe
characters, and those that cannot be offered are skipped with their reason."""

from typing import Any

import pytest

from app.tools.mcp import McpToolSpec, discover, named, tool_name
from app.tools.models import TOOL_NAME_PATTERN

_OBJECT: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "string"}}}


def _tool(name: Any, schema: Any = None, **fields: Any) -> dict[str, Any]:
    """A tool as a server lists it (its JSON)."""
    return {"name": name, "inputSchema": _OBJECT if schema is None else schema, **fields}


def test_valid_tools_keep_their_description_and_schema() -> None:
    found = discover("docs", [_tool("search", description="Searches the docs.")])

    assert found.skipped == []
    assert found.tools == [McpToolSpec("search", "Searches the docs.", _OBJECT)]


def test_a_tool_without_description_is_described_by_its_title_or_its_server() -> None:
    found = discover("docs", [_tool("a", title="Find things"), _tool("b")])

    assert [spec.description for spec in found.tools] == ["Find things", "b (MCP server docs)"]


def test_invalid_schemas_are_skipped_with_their_reason() -> None:
    found = discover(
        "docs",
        [
            _tool("ok"),
            _tool("text", {"type": "string"}),
            _tool("bogus", {"type": "object", "properties": {"x": {"type": "bogus"}}}),
            _tool("none", {}),
            _tool("string", "not a schema"),
        ],
    )

    assert [spec.remote for spec in found.tools] == ["ok"]
    reasons = dict(found.skipped)
    assert reasons["text"] == "its inputSchema is not of type 'object'"
    assert reasons["bogus"].startswith("its inputSchema is not a valid JSON Schema at properties/x")
    assert reasons["none"] == "its inputSchema is not of type 'object'"
    assert reasons["string"] == "its inputSchema is not a JSON object"


def test_a_tool_without_a_usable_name_is_skipped() -> None:
    found = discover("docs", [_tool(None), _tool(""), _tool("x" * 200), _tool("fine")])

    assert [spec.remote for spec in found.tools] == ["fine"]
    assert [reason for _, reason in found.skipped] == [
        "it has no name",
        "it has no name",
        "its name is too long",
    ]


def test_a_tool_listed_twice_is_offered_once() -> None:
    found = discover("docs", [_tool("a"), _tool("a")])

    assert [spec.remote for spec in found.tools] == ["a"]
    assert found.skipped == [("a", "listed twice")]


def test_names_are_made_safe_and_fit_64_characters() -> None:
    assert tool_name("docs", "search.issues/v2") == "docs__search_issues_v2"
    assert tool_name("docs", "ünïcode tool") == "docs__n_code_tool"
    assert tool_name("docs", "...") is None
    long = tool_name("a-very-long-server-name-of-31ch", "x" * 100)
    assert long is not None
    assert len(long) == 64
    assert long.startswith("a-very-long-server-name-of-31ch__x")


def test_every_name_matches_the_tool_name_pattern() -> None:
    import re

    specs = [McpToolSpec(remote, "d", _OBJECT) for remote in ["a b", "ä", "x" * 80, "-y-"]]
    tools, _ = named("srv", specs)

    assert tools
    assert all(re.match(TOOL_NAME_PATTERN, name) for name, _ in tools)


def test_tools_whose_names_collide_are_all_skipped_and_reported() -> None:
    specs = [McpToolSpec(remote, "d", _OBJECT) for remote in ["get.item", "get/item", "list"]]

    tools, skipped = named("srv", specs)

    assert [name for name, _ in tools] == ["srv__list"]
    assert dict(skipped) == {
        "get.item": "its name 'srv__get_item' would also be that of 'get/item'",
        "get/item": "its name 'srv__get_item' would also be that of 'get.item'",
    }


def test_a_tool_with_no_safe_character_is_skipped() -> None:
    tools, skipped = named("srv", [McpToolSpec("???", "d", _OBJECT)])

    assert tools == []
    assert skipped == [("???", "its name has no character a tool name may hold")]


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_spec_survives_its_stored_document(idempotent: bool) -> None:
    spec = McpToolSpec("search", "Searches.", _OBJECT, idempotent)

    assert McpToolSpec.of(spec.document()) == spec


def test_a_document_stored_without_idempotent_is_not_idempotent() -> None:
    stored = {"remote": "search", "description": "Searches.", "parameters": _OBJECT}

    assert McpToolSpec.of(stored).idempotent is False


@pytest.mark.parametrize(
    ("annotations", "idempotent"),
    [
        ({"idempotentHint": True}, True),
        ({"readOnlyHint": True}, True),
        ({"readOnlyHint": False, "idempotentHint": True}, True),
        ({"readOnlyHint": True, "idempotentHint": False}, True),
        ({"readOnlyHint": False, "idempotentHint": False}, False),
        ({"destructiveHint": False, "openWorldHint": False}, False),
        ({"title": "Search"}, False),
        ({}, False),
        ({"idempotentHint": "true", "readOnlyHint": 1}, False),
        ({"idempotent_hint": True, "read_only_hint": True}, False),  # not the wire names
        (None, False),
        (["idempotentHint"], False),
    ],
)
def test_a_tool_is_idempotent_when_its_annotations_say_so(
    annotations: Any, idempotent: bool
) -> None:
    found = discover("docs", [_tool("search", annotations=annotations)])

    assert [spec.idempotent for spec in found.tools] == [idempotent]


def test_a_tool_without_annotations_is_not_idempotent() -> None:
    found = discover("docs", [_tool("search")])

    assert found.tools[0].idempotent is False


@pytest.mark.parametrize(
    ("annotations", "egress"),
    [
        # Only a tool that changes nothing and deals with no open world keeps data in.
        ({"readOnlyHint": True, "openWorldHint": False}, False),
        # A read-only tool of the open world (MCP's default) sends its arguments there.
        ({"readOnlyHint": True}, True),
        ({"readOnlyHint": True, "openWorldHint": True}, True),
        ({"readOnlyHint": False, "openWorldHint": False}, True),
        ({"openWorldHint": False}, True),
        ({"readOnlyHint": "true", "openWorldHint": "false"}, True),
        ({}, True),
        (None, True),
    ],
)
def test_a_tool_may_carry_data_out_unless_its_annotations_say_it_cannot(
    annotations: Any, egress: bool
) -> None:
    found = discover("docs", [_tool("search", annotations=annotations)])

    assert [spec.egress for spec in found.tools] == [egress]


def test_a_document_stored_without_egress_may_carry_data_out() -> None:
    stored = {"remote": "search", "description": "Searches.", "parameters": _OBJECT}
    closed = McpToolSpec("search", "Searches.", _OBJECT, egress=False)

    assert McpToolSpec.of(stored).egress is True
    assert McpToolSpec.of(closed.document()) == closed
