"""text_transform does each string operation exactly, refuses arguments an operation lacks,
keeps its output under the cap, and stops a regular expression that backtracks without end."""

from typing import Any

import pytest

from app.chain import ErrorCode, ReasoningChain
from app.tools.builtin.text import (
    MAX_MATCHES,
    MAX_OUTPUT_CHARS,
    MAX_TEXT_CHARS,
    OPERATIONS,
    TextTransformTool,
)
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from tests.factories import context_for


async def _run(arguments: dict[str, Any], tool: TextTransformTool | None = None) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    executor = ToolExecutor(ToolRegistry([tool or TextTransformTool()]))
    return await executor.execute(chain, context_for(chain), "text_transform", arguments)


async def _result(operation: str, text: str | None = None, **arguments: Any) -> Any:
    if text is not None:
        arguments["text"] = text
    result = await _run({"operation": operation, **arguments})
    assert result.success, result.error
    assert result.value["operation"] == operation
    return result.value["result"]


@pytest.mark.parametrize(
    ("operation", "text", "arguments", "expected"),
    [
        ("upper", "Straße", {}, "STRASSE"),
        ("lower", "ÉCOLE Normale", {}, "école normale"),
        ("title", "don't STOP me now", {}, "Don't Stop Me Now"),
        ("capitalize", "hello World", {}, "Hello World"),
        ("trim", "  both \n", {}, "both"),
        ("trim", "--x--", {"characters": "-"}, "x"),
        ("trim_start", "  left ", {}, "left "),
        ("trim_end", "  right ", {}, "  right"),
        ("collapse_whitespace", " a \t b\n\nc ", {}, "a b c"),
        ("reverse", "abc✓", {}, "✓cba"),
        ("replace", "a-b-c-d", {"find": "-", "replacement": "+"}, "a+b+c+d"),
        ("replace", "a-b-c-d", {"find": "-", "replacement": "", "count": 2}, "abc-d"),
        ("split", "a, b,c", {"separator": ","}, ["a", " b", "c"]),
        ("split", " one  two\tthree ", {}, ["one", "two", "three"]),
        ("split", "k=v=w", {"separator": "=", "max_splits": 1}, ["k", "v=w"]),
        ("base64_encode", "héllo", {}, "aMOpbGxv"),
        ("base64_decode", "aMOpbGxv", {}, "héllo"),
        ("base64_decode", "aMOpbGx", {}, "héll"),  # padding dropped by the encoder
        ("base64_decode", "Pz8-", {}, "??>"),  # the URL-safe alphabet
        ("url_encode", "a b&c=d/é", {}, "a%20b%26c%3Dd%2F%C3%A9"),
        ("url_decode", "a%20b%26c%3Dd%2F%C3%A9", {}, "a b&c=d/é"),
        ("slugify", "  Héllo, Wörld! — 2026 ", {}, "hello-world-2026"),
        ("slugify", "A very long title indeed", {"max_length": 12}, "a-very-long"),
        ("truncate", "The quick brown fox", {"max_length": 12}, "The quick b…"),
        ("truncate", "The quick brown fox", {"max_length": 12, "suffix": "..."}, "The quick..."),
        ("truncate", "short", {"max_length": 12}, "short"),
    ],
)
async def test_each_operation_transforms_exactly(
    operation: str, text: str, arguments: dict[str, Any], expected: Any
) -> None:
    assert await _result(operation, text, **arguments) == expected


async def test_join_joins_items_without_text() -> None:
    assert await _result("join", items=["a", "b", "c"], separator=", ") == "a, b, c"


async def test_count_counts_characters_words_lines_and_bytes() -> None:
    assert await _result("count", "Héllo wörld.\nSecond line here") == {
        "characters": 29,
        "words": 5,
        "lines": 2,
        "bytes": 31,
    }


async def test_regex_match_returns_every_match_with_its_groups() -> None:
    matches = await _result(
        "regex_match", "alice@example.com, BOB@corp.example", pattern=r"(?P<user>\w+)@([\w.]+)"
    )

    assert matches == [
        {
            "match": "alice@example.com",
            "start": 0,
            "end": 17,
            "groups": ["alice", "example.com"],
            "named": {"user": "alice"},
        },
        {
            "match": "BOB@corp.example",
            "start": 19,
            "end": 35,
            "groups": ["BOB", "corp.example"],
            "named": {"user": "BOB"},
        },
    ]


async def test_regex_replace_uses_group_references_and_ignore_case() -> None:
    swapped = await _result(
        "regex_replace", "Smith, John; DOE, jane", pattern=r"(\w+), (\w+)", replacement=r"\2 \1"
    )
    first_only = await _result(
        "regex_replace", "cat Cat CAT", pattern="cat", replacement="dog", ignore_case=True, count=2
    )

    assert swapped == "John Smith; jane DOE"
    assert first_only == "dog dog CAT"


async def test_more_matches_than_the_limit_are_cut_and_say_so() -> None:
    result = await _run({"operation": "regex_match", "text": "a" * 1_500, "pattern": "a"})

    assert result.value["count"] == MAX_MATCHES
    assert len(result.value["result"]) == MAX_MATCHES
    assert result.value["truncated"] is True


async def test_a_catastrophic_pattern_times_out_with_a_clear_error() -> None:
    tool = TextTransformTool(regex_timeout_s=0.05)
    result = await _run(
        {"operation": "regex_match", "text": "a" * 60 + "b", "pattern": "(a|aa)+$"}, tool
    )

    assert not result.success
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == (
        "the pattern took longer than 0.05 s on this text; simplify it (nested repetition "
        "such as (a+)+ backtracks without end)"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"operation": "upper"}, "text: is required for upper"),
        ({"operation": "replace", "text": "x"}, "find: is required for replace"),
        ({"operation": "join"}, "items: is required for join"),
        ({"operation": "truncate", "text": "x"}, "max_length: is required for truncate"),
        ({"operation": "regex_match", "text": "x"}, "pattern: is required for regex_match"),
        (
            {"operation": "regex_match", "text": "x", "pattern": "(unclosed"},
            "pattern: is not a valid regular expression: missing )",
        ),
        (
            {"operation": "regex_replace", "text": "x", "pattern": "x", "replacement": r"\3"},
            "replacement: is not a valid template",
        ),
        ({"operation": "base64_decode", "text": "not base64!"}, "text: is not valid base64"),
        ({"operation": "shout", "text": "x"}, "operation: 'shout' is not one of"),
    ],
)
async def test_missing_or_bad_arguments_are_invalid_arguments(
    arguments: dict[str, Any], message: str
) -> None:
    result = await _run(arguments)

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert message in result.error


async def test_decoded_bytes_that_are_not_text_fail_clearly() -> None:
    result = await _run({"operation": "base64_decode", "text": "//79"})

    assert result.error == "the decoded data (3 bytes) is not UTF-8 text, so it cannot be shown"


@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "replace", "text": "a" * 1_000, "find": "a", "replacement": "b" * 1_000},
        {
            "operation": "regex_replace",
            "text": "a" * 1_000,
            "pattern": "a",
            "replacement": "b" * 1_000,
        },
        {"operation": "join", "items": ["x" * MAX_TEXT_CHARS] * 3},
        {"operation": "url_encode", "text": "é" * (MAX_TEXT_CHARS // 2)},
    ],
)
async def test_outputs_past_the_cap_are_refused_before_they_are_built(
    arguments: dict[str, Any],
) -> None:
    result = await _run(arguments)

    assert not result.success
    assert result.error is not None
    assert result.error.startswith("the result would be ")
    assert result.error.endswith(f"characters long; the limit is {MAX_OUTPUT_CHARS:,}")


async def test_the_schema_lists_every_operation_and_caps_the_text() -> None:
    parameters = TextTransformTool().definition.parameters

    assert parameters["properties"]["operation"]["enum"] == list(OPERATIONS)
    assert parameters["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert len(OPERATIONS) == 21
