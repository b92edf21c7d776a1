"""The tool registry holds tools by name with their compiled validators; bad arguments are
named field by field."""

from collections.abc import Callable
from typing import Any

import pytest

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import (
    FieldError,
    ToolAlreadyRegisteredError,
    ToolNotFoundError,
    ToolRegistryError,
)
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from app.tools.validation import compile_validator, field_errors


class FixedTool(BaseTool):
    """A tool whose definition is given; it returns its arguments."""

    def __init__(
        self,
        name: str,
        tool_type: ToolType = ToolType.CUSTOM,
        *,
        description: str = "a test tool",
        parameters: dict[str, Any] | None = None,
    ) -> None:
        self._definition = ToolDefinition(
            name=name,
            type=tool_type,
            description=description,
            parameters=parameters or {"type": "object", "properties": {}},
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput(arguments)


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "filter": {
            "type": "object",
            "properties": {
                "since": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "owner": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"],
                },
            },
            "required": ["since"],
            "additionalProperties": False,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def test_registered_tools_are_found_by_name() -> None:
    search = FixedTool("search", ToolType.EXTERNAL)
    registry = ToolRegistry([search])

    assert registry.get("search") is search
    assert registry.definition("search") is search.definition
    assert registry.entry("search").tool is search
    assert registry.has("search")
    assert "search" in registry
    assert not registry.has("other")
    assert "other" not in registry
    assert len(registry) == 1


def test_names_keep_registration_order() -> None:
    registry = ToolRegistry([FixedTool("b"), FixedTool("a")])
    registry.register(FixedTool("c"))

    assert registry.names() == ["b", "a", "c"]
    assert len(registry) == 3


def test_registering_a_taken_name_is_refused() -> None:
    first = FixedTool("search")
    registry = ToolRegistry([first])

    with pytest.raises(ToolAlreadyRegisteredError, match="search") as caught:
        registry.register(FixedTool("search", description="another"))

    assert caught.value.name == "search"
    assert isinstance(caught.value, ToolRegistryError)
    assert registry.get("search") is first


def test_duplicate_names_in_the_constructor_are_refused() -> None:
    with pytest.raises(ToolAlreadyRegisteredError):
        ToolRegistry([FixedTool("search"), FixedTool("search")])


def test_replace_swaps_the_tool_and_its_validator() -> None:
    registry = ToolRegistry([FixedTool("search")])
    newer = FixedTool("search", parameters=SEARCH_SCHEMA)

    registry.register(newer, replace=True)

    assert registry.get("search") is newer
    assert len(registry) == 1
    assert field_errors(registry.entry("search").validator, {}) == [
        FieldError("query", "is required")
    ]


def test_unregister_removes_the_tool() -> None:
    registry = ToolRegistry([FixedTool("a"), FixedTool("b")])

    registry.unregister("a")

    assert registry.names() == ["b"]
    assert "a" not in registry
    with pytest.raises(ToolNotFoundError):
        registry.get("a")


@pytest.mark.parametrize(
    "lookup",
    [
        lambda r: r.unregister("missing"),
        lambda r: r.get("missing"),
        lambda r: r.definition("missing"),
        lambda r: r.entry("missing"),
    ],
    ids=["unregister", "get", "definition", "entry"],
)
def test_missing_tool_raises_tool_not_found_which_is_a_key_error(
    lookup: Callable[[ToolRegistry], object],
) -> None:
    registry = ToolRegistry([FixedTool("present")])

    with pytest.raises(KeyError) as caught:
        lookup(registry)

    assert isinstance(caught.value, ToolNotFoundError)
    assert caught.value.name == "missing"
    assert str(caught.value) == "no tool named 'missing' is registered"
    assert registry.names() == ["present"]


@pytest.mark.parametrize(
    ("tool_type", "expected"),
    [
        (None, ["llm", "web", "calc", "db"]),
        (ToolType.EXTERNAL, ["web"]),
        (ToolType.SKILL, ["calc"]),
        (ToolType.LLM, ["llm"]),
        (ToolType.SUB_AGENT, []),
    ],
)
def test_list_tools_filters_by_type(tool_type: ToolType | None, expected: list[str]) -> None:
    registry = ToolRegistry(
        [
            FixedTool("llm", ToolType.LLM),
            FixedTool("web", ToolType.EXTERNAL),
            FixedTool("calc", ToolType.SKILL),
            FixedTool("db", ToolType.DATABASE),
        ]
    )

    definitions = registry.list_tools(tool_type)

    assert [d.name for d in definitions] == expected
    assert all(isinstance(d, ToolDefinition) for d in definitions)


def _errors(arguments: Any) -> list[FieldError]:
    return field_errors(compile_validator(SEARCH_SCHEMA), arguments)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x"}, []),
        ({"query": "x", "limit": 3, "filter": {"since": "2024", "tags": ["a"]}}, []),
        ({}, [FieldError("query", "is required")]),
        ({"query": "x", "filter": {}}, [FieldError("filter.since", "is required")]),
        (
            {"query": "x", "filter": {"since": "y", "owner": {}}},
            [FieldError("filter.owner.id", "is required")],
        ),
    ],
    ids=["valid", "valid-nested", "missing", "missing-nested", "missing-deep"],
)
def test_missing_required_fields_are_named(
    arguments: dict[str, Any], expected: list[FieldError]
) -> None:
    assert _errors(arguments) == expected


def test_unknown_fields_are_named_with_the_expected_ones() -> None:
    errors = _errors({"query": "x", "qeury": "y", "filter": {"since": "z", "sinse": "w"}})

    assert errors == [
        FieldError("filter.sinse", "is not a known argument (expected: owner, since, tags)"),
        FieldError("qeury", "is not a known argument (expected: filter, limit, query)"),
    ]


def test_unknown_fields_of_a_tool_without_arguments_expect_none() -> None:
    validator = compile_validator(
        {"type": "object", "properties": {}, "additionalProperties": False}
    )

    assert field_errors(validator, {"x": 1}) == [
        FieldError("x", "is not a known argument (expected: none)")
    ]


def test_arguments_matching_pattern_properties_are_not_called_unknown() -> None:
    validator = compile_validator(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
        }
    )

    errors = field_errors(validator, {"name": "n", "x_count": 1, "other": 2})

    assert errors == [FieldError("other", "is not a known argument (expected: name)")]


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"query": 1}, "query", "1 is not of type 'string'"),
        ({"query": "x", "limit": "3"}, "limit", "'3' is not of type 'integer'"),
        (
            {"query": "x", "filter": {"since": "y", "tags": ["a", 2]}},
            "filter.tags.1",
            "2 is not of type 'string'",
        ),
        (
            {"query": "x", "filter": {"since": "y", "owner": {"id": "me"}}},
            "filter.owner.id",
            "'me' is not of type 'integer'",
        ),
    ],
)
def test_wrong_types_are_named_by_their_dotted_path(
    arguments: dict[str, Any], field: str, message: str
) -> None:
    assert _errors(arguments) == [FieldError(field, message)]


def test_every_bad_field_is_reported_once_in_field_order() -> None:
    errors = _errors({"limit": "many", "zzz": 1, "filter": {"tags": "a"}})

    assert [e.field for e in errors] == ["filter.since", "filter.tags", "limit", "query", "zzz"]


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [([1, 2], "list"), ("text", "str"), (None, "NoneType"), (3, "int")],
)
def test_non_object_arguments_are_one_whole_object_error(arguments: Any, kind: str) -> None:
    assert _errors(arguments) == [FieldError("", f"arguments must be a JSON object, not {kind}")]
    assert str(_errors(arguments)[0]) == f"arguments must be a JSON object, not {kind}"


def test_field_error_text_names_its_field() -> None:
    assert str(FieldError("filter.since", "is required")) == "filter.since: is required"
