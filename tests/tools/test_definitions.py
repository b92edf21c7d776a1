"""Tool definitions: names and schemas are checked, rendered for OpenAI and ReAct prompts;
retry policies back off within bounds; results summarize through a safe template."""

from typing import Any
from uuid import uuid4

import pytest
from pydantic import ValidationError

from app.chain import ErrorCode, ToolResultInfo, ToolType
from app.tools.base import BaseTool
from app.tools.errors import ErrorClass
from app.tools.models import (
    NO_RETRY,
    RetryPolicy,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)

WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "Where to look"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Scale"},
        "days": {"type": ["integer", "null"]},
        "extra": {},
    },
    "required": ["city"],
}


def definition(**fields: Any) -> ToolDefinition:
    return ToolDefinition(
        **{"name": "tool", "type": ToolType.CUSTOM, "description": "does things", **fields}
    )


class TemplateTool(BaseTool):
    """A tool that only exists to be summarized."""

    def __init__(self, summary_template: str | None) -> None:
        self._definition = definition(
            name="query_db",
            type=ToolType.DATABASE,
            visibility=ToolVisibilityConfig(summary_template=summary_template),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput(None)


def outcome(**fields: Any) -> ToolResultInfo:
    return ToolResultInfo(
        correlation_id=uuid4(), **{"success": True, "duration_ms": 12.5, **fields}
    )


@pytest.mark.parametrize("name", ["a", "web-search", "calc_2", "UPPER", "x" * 64])
def test_valid_tool_names_are_accepted(name: str) -> None:
    assert definition(name=name).name == name


@pytest.mark.parametrize(
    "name", ["", "web search", "x" * 65, "files.read", "search\n", "café", "a/b"]
)
def test_invalid_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        definition(name=name)


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "string"},
        {"properties": {"a": {"type": "string"}}},
        {},
    ],
    ids=["array", "string", "untyped", "empty"],
)
def test_parameters_that_are_not_an_object_schema_are_refused(parameters: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="type 'object'"):
        definition(parameters=parameters)


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
    ],
    ids=["unknown-type", "required-not-a-list", "negative-min-length"],
)
def test_parameters_that_are_not_a_valid_json_schema_are_refused(
    parameters: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError, match="parameters are not a valid JSON Schema"):
        definition(parameters=parameters)


def test_default_parameters_are_an_empty_object_schema() -> None:
    assert definition().parameters == {"type": "object", "properties": {}}


def test_openai_tool_has_the_function_tool_shape() -> None:
    weather = definition(
        name="weather", description="Current weather", parameters=WEATHER_PARAMETERS
    )

    assert weather.to_openai_tool() == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Current weather",
            "parameters": WEATHER_PARAMETERS,
        },
    }


def test_a_definition_offers_one_openai_form_and_a_changed_copy_its_own() -> None:
    weather = definition(
        name="weather", description="Current weather", parameters=WEATHER_PARAMETERS
    )

    # One object per definition: every call offering it reuses its serialised JSON.
    assert weather.to_openai_tool() is weather.to_openai_tool()
    renamed = weather.model_copy(update={"description": "Weather now"})
    assert renamed.to_openai_tool()["function"]["description"] == "Weather now"
    assert weather.to_openai_tool()["function"]["description"] == "Current weather"


def test_react_description_lists_every_argument() -> None:
    weather = definition(
        name="weather",
        description="Current weather",
        parameters=WEATHER_PARAMETERS,
        returns_description="temperature and sky",
    )

    assert weather.to_react_description() == (
        "weather: Current weather\n"
        "  Arguments (a JSON object):\n"
        "    - city (string, required): Where to look\n"
        '    - unit (string, optional): Scale One of: ["celsius", "fahrenheit"].\n'
        "    - days (integer | null, optional)\n"
        "    - extra (any, optional)\n"
        "  Returns: temperature and sky"
    )


def test_react_description_of_a_tool_without_arguments_is_one_line() -> None:
    assert definition(name="now", description="The time").to_react_description() == (
        "now: The time"
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            RetryPolicy(initial_backoff_s=0.5, multiplier=2, max_backoff_s=100, jitter=0),
            [0.5, 1.0, 2.0, 4.0, 8.0],
        ),
        (
            RetryPolicy(initial_backoff_s=1, multiplier=3, max_backoff_s=100, jitter=0),
            [1.0, 3.0, 9.0, 27.0, 81.0],
        ),
        (
            RetryPolicy(initial_backoff_s=1, multiplier=2, max_backoff_s=3, jitter=0),
            [1.0, 2.0, 3.0, 3.0, 3.0],
        ),
        (
            RetryPolicy(initial_backoff_s=2, multiplier=1, max_backoff_s=8, jitter=0),
            [2.0, 2.0, 2.0, 2.0, 2.0],
        ),
    ],
    ids=["doubling", "tripling", "capped", "constant"],
)
def test_backoff_grows_exponentially_up_to_the_cap(
    policy: RetryPolicy, expected: list[float]
) -> None:
    assert [policy.backoff_s(attempt) for attempt in range(1, 6)] == expected


@pytest.mark.parametrize(
    ("attempt", "retry_after_s", "expected"),
    [
        (1, 5.0, 5.0),
        (1, 0.1, 1.0),
        (3, 2.0, 4.0),
        (1, 30.0, 10.0),
        (6, 3.0, 10.0),
    ],
    ids=["longer-wins", "shorter-ignored", "backoff-longer", "capped", "backoff-capped"],
)
def test_retry_after_is_honoured_up_to_the_cap(
    attempt: int, retry_after_s: float, expected: float
) -> None:
    policy = RetryPolicy(initial_backoff_s=1, multiplier=2, max_backoff_s=10, jitter=0)

    assert policy.backoff_s(attempt, retry_after_s) == expected


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5, 6])
def test_jitter_stays_within_its_bounds_and_the_cap(attempt: int) -> None:
    policy = RetryPolicy(initial_backoff_s=1, multiplier=2, max_backoff_s=10, jitter=0.25)
    base = min(1 * 2 ** (attempt - 1), 10)

    samples = [policy.backoff_s(attempt) for _ in range(500)]

    assert all(base * 0.75 <= delay <= base * 1.25 for delay in samples)
    assert all(delay <= 10 for delay in samples)


def test_jitter_spreads_delays_below_the_cap() -> None:
    policy = RetryPolicy(initial_backoff_s=1, multiplier=2, max_backoff_s=100, jitter=0.5)

    samples = {policy.backoff_s(2) for _ in range(50)}

    assert len(samples) > 1
    assert min(samples) < 2 < max(samples)


@pytest.mark.parametrize(
    ("error_class", "attempt", "expected"),
    [
        (ErrorClass.TIMEOUT, 1, True),
        (ErrorClass.RATE_LIMIT, 2, True),
        (ErrorClass.TRANSIENT, 1, True),
        (ErrorClass.TRANSIENT, 3, False),
        (ErrorClass.TIMEOUT, 4, False),
        (ErrorClass.PERMANENT, 1, False),
        (ErrorClass.INVALID_ARGUMENTS, 1, False),
    ],
)
def test_should_retry_only_retryable_classes_below_max_attempts(
    error_class: ErrorClass, attempt: int, expected: bool
) -> None:
    assert RetryPolicy(max_attempts=3).should_retry(error_class, attempt) is expected


def test_should_retry_follows_a_custom_retry_on() -> None:
    policy = RetryPolicy(max_attempts=5, retry_on=frozenset({ErrorClass.PERMANENT}))

    assert policy.should_retry(ErrorClass.PERMANENT, 4)
    assert not policy.should_retry(ErrorClass.TIMEOUT, 1)


@pytest.mark.parametrize("error_class", list(ErrorClass))
def test_no_retry_policy_never_retries(error_class: ErrorClass) -> None:
    assert not NO_RETRY.should_retry(error_class, 1)


@pytest.mark.parametrize(
    ("template", "fields", "expected"),
    [
        (
            "Queried {table}: {row_count} rows",
            {"result": {"table": "users", "row_count": 3}},
            "Queried users: 3 rows",
        ),
        (
            "Queried {table}: {row_count} rows",
            {"result": {"table": "users"}},
            "Queried users: ? rows",
        ),
        ("{row_count:>4d}|{missing:d}", {"result": {"row_count": 7}}, "   7|?"),
        ("{model} took {duration_ms} ms", {"model": "m1"}, "m1 took 12.5 ms"),
        ("got {result}", {"result": [1, 2]}, "got [1, 2]"),
        ("got {result}", {"result": "text"}, "got text"),
    ],
    ids=["fields", "missing", "format-spec", "result-info", "list", "text"],
)
def test_summary_template_renders_result_fields(
    template: str, fields: dict[str, Any], expected: str
) -> None:
    assert TemplateTool(template).summarize(outcome(**fields)) == expected


def test_summary_without_template_says_the_tool_succeeded() -> None:
    assert TemplateTool(None).summarize(outcome(result={"x": 1})) == "query_db succeeded"


@pytest.mark.parametrize(
    ("error_code", "expected"),
    [(ErrorCode.TIMEOUT, "query_db failed: timeout"), (None, "query_db failed: error")],
)
def test_failed_result_summarizes_as_a_failure(error_code: ErrorCode | None, expected: str) -> None:
    result = outcome(success=False, error="boom", error_code=error_code)

    assert TemplateTool("{table}").summarize(result) == expected
