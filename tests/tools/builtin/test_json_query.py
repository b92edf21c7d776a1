"""json_query answers JSONPath queries over a document given as an object or as JSON text,
refuses bad paths and oversized or unsafe input with clear errors, and stops a runaway query."""

import json
from typing import Any

import pytest

from app.chain import ErrorCode, ReasoningChain
from app.tools.builtin.json_query import MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_RESULTS, JsonQueryTool
from app.tools.errors import ErrorClass, ToolError
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.factories import context_for

STORE = {
    "store": {
        "book": [
            {"author": "Nigel Rees", "title": "Sayings", "price": 8.95, "tags": ["classic"]},
            {"author": "Evelyn Waugh", "title": "Sword", "price": 12.99, "tags": []},
            {"author": "Herman Melville", "title": "Moby Dick", "price": 8.99, "isbn": "0-553"},
        ],
        "bicycle": {"color": "red", "price": 19.95},
    }
}


async def _run(arguments: dict[str, Any], tool: JsonQueryTool | None = None) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    executor = ToolExecutor(ToolRegistry([tool or JsonQueryTool()]))
    return await executor.execute(chain, context_for(chain), "json_query", arguments)


async def _query(data: Any, query: str, **extra: Any) -> dict[str, Any]:
    result = await _run({"data": data, "query": query, **extra})
    assert result.success, result.error
    assert isinstance(result.value, dict)
    return result.value


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("$.store.book[*].author", ["Nigel Rees", "Evelyn Waugh", "Herman Melville"]),
        ("$..price", [8.95, 12.99, 8.99, 19.95]),
        ("$.store.book[?(@.price < 10)].title", ["Sayings", "Moby Dick"]),
        ("$.store.book[?(@.isbn)].title", ["Moby Dick"]),
        ("$.store.book[?(@.tags[*] == 'classic')].title", ["Sayings"]),
        ("$.store.book[-1:].author", ["Herman Melville"]),
        ("$.store.bicycle['color','price']", ["red", 19.95]),
        ("$.store.book.`len`", [3]),
        ("$.store.book[/price][*].title", ["Sayings", "Moby Dick", "Sword"]),
        ("$.store.bicycle.price * 2", [39.9]),
        ("$.store.missing", []),
    ],
)
async def test_queries_return_every_match_as_a_list(query: str, expected: list[Any]) -> None:
    value = await _query(STORE, query)

    assert value["results"] == expected
    assert value["count"] == len(expected)


async def test_a_document_given_as_json_text_is_queried_like_an_object() -> None:
    as_text = await _query(json.dumps(STORE), "$.store.book[1].title")
    as_array = await _query([{"id": 1}, {"id": 2}], "$[*].id")

    assert as_text["results"] == ["Sword"]
    assert as_array["results"] == [1, 2]


async def test_paths_say_where_each_result_was_found() -> None:
    value = await _query(STORE, "$.store.book[?(@.price > 10)].author", include_paths=True)

    assert value["results"] == ["Evelyn Waugh"]
    assert value["paths"] == ["store.book.[1].author"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("$.store.book[", "query: is not valid JSONPath: Parse error near the end of string"),
        ("$.store.book[?(@.price <)]", "query: is not valid JSONPath"),
        ("$.a | $.b", "query: uses unsupported syntax: The `|` (union) operator is deprecated"),
        ("$.store.book[?(@.author == Nigel)]", "query: uses unsupported syntax: An unquoted"),
        ("$.store.book[?(@.author =~ 'Nig.*')]", "query: regular expressions (=~, sub())"),
        ("$.store.book[*].author.`sub(/e/, E)`", "query: regular expressions (=~, sub())"),
    ],
)
async def test_a_bad_path_is_invalid_arguments_naming_the_problem(query: str, message: str) -> None:
    result = await _run({"data": STORE, "query": query})

    assert not result.success
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert message in result.error


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{'single': 'quotes'}", "data: is not valid JSON text"),
        ('{"n": NaN}', "data: cannot be read as JSON: NaN is not a JSON value"),
        ("1" * 5_000, "data: cannot be read as JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "data: cannot be read as JSON: maximum recursion depth"),
        ("[" * 100 + "]" * 100, f"data: is nested more than {MAX_DEPTH} levels deep"),
    ],
)
async def test_documents_that_are_not_json_are_refused(data: str, message: str) -> None:
    result = await _run({"data": data, "query": "$"})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert message in result.error


async def test_documents_past_the_size_cap_are_refused_as_text_and_as_objects() -> None:
    as_object = await _run({"data": {"blob": "x" * MAX_DOCUMENT_BYTES}, "query": "$"})
    # Multi-byte characters count as the bytes they are, not as characters.
    as_text = await _run(
        {"data": json.dumps(["é" * (MAX_DOCUMENT_BYTES // 2)], ensure_ascii=False), "query": "$"}
    )
    too_long = await _run({"data": "x" * (MAX_DOCUMENT_BYTES + 1), "query": "$"})

    for result in (as_object, as_text):
        assert result.error_code is ErrorCode.INVALID_ARGUMENTS
        assert result.error == (
            f"invalid arguments for json_query: data: is larger than "
            f"{MAX_DOCUMENT_BYTES:,} bytes of JSON"
        )
    assert too_long.error_code is ErrorCode.INVALID_ARGUMENTS  # by the schema, before the tool


async def test_documents_nested_past_the_depth_cap_are_refused() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    fine: Any = 1
    for _ in range(MAX_DEPTH):
        fine = [fine]

    refused = await _run({"data": deep, "query": "$"})
    accepted = await _query(fine, "$" + "[0]" * MAX_DEPTH)

    assert refused.error is not None
    assert f"data: is nested more than {MAX_DEPTH} levels deep" in refused.error
    assert accepted["results"] == [1]


async def test_multiplying_text_matches_nothing_instead_of_allocating() -> None:
    value = await _query({"s": "x" * 1_000, "n": 10**9}, "$.s * $.n")

    assert value["results"] == []


async def test_arithmetic_that_leaves_json_matches_nothing() -> None:
    overflow = await _query({"a": 1e308}, "$.a * 10")
    huge = await _query({"a": 10**3_000}, "$.a * $.a")

    assert overflow["results"] == []
    assert huge["results"] == []


async def test_more_matches_than_the_limit_are_cut_and_say_so() -> None:
    value = await _query(list(range(MAX_RESULTS + 5)), "$[*]")

    assert value["count"] == MAX_RESULTS + 5
    assert value["results"] == list(range(MAX_RESULTS))
    assert value["truncated"] is True


async def test_a_query_over_its_cpu_budget_fails_instead_of_running_on() -> None:
    # Every node's subtree, for every node's subtree: far past a 50 ms budget.
    node: Any = list(range(20))
    for _ in range(6):
        node = [node, node, node]

    result = await _run({"data": node, "query": "$..*..*"}, JsonQueryTool(cpu_budget_s=0.05))

    assert not result.success
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == (
        "the query took more than 0.05 s of CPU time; narrow it "
        "(fewer '..' segments, a narrower starting point)"
    )


async def test_the_definition_caches_identical_calls_for_five_minutes() -> None:
    definition = JsonQueryTool().definition

    assert definition.cache_ttl_seconds == 300
    assert definition.parameters["required"] == ["data", "query"]


async def test_a_bad_query_raises_invalid_arguments_from_execute() -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")

    with pytest.raises(ToolError) as caught:
        await JsonQueryTool().execute({"data": {}, "query": "$["}, context_for(chain))

    assert caught.value.error_class is ErrorClass.INVALID_ARGUMENTS
