"""current_time reports the time in a zone named by IANA name or by place, from a fixed clock."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import available_timezones

import pytest

from app.chain import ErrorCode, ReasoningChain, ToolType
from app.tools.builtin import CurrentTimeTool, resolve_timezone
from app.tools.builtin.current_time import _PLACE_ALIASES
from app.tools.errors import InvalidToolArguments
from app.tools.executor import ToolExecutor
from app.tools.models import NO_RETRY, ToolCallContext
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult

SUMMER = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC)  # a Wednesday
WINTER = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)  # a Thursday


def _clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def _context(chain: ReasoningChain) -> ToolCallContext:
    return ToolCallContext(task_id="t", agent_id="a", chain_id=chain.id)


async def _now(arguments: dict[str, Any], moment: datetime = SUMMER) -> dict[str, Any]:
    chain = ReasoningChain(task_id="t", agent_id="a")
    output = await CurrentTimeTool(clock=_clock(moment)).execute(arguments, _context(chain))
    assert isinstance(output.value, dict)
    return output.value


async def _run(arguments: dict[str, Any], moment: datetime = SUMMER) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    executor = ToolExecutor(ToolRegistry([CurrentTimeTool(clock=_clock(moment))]))
    return await executor.execute(chain, _context(chain), "current_time", arguments)


async def test_paris_in_summer_is_two_hours_ahead() -> None:
    assert await _now({"timezone": "Europe/Paris"}) == {
        "timezone": "Europe/Paris",
        "iso": "2026-07-01T14:00:00+02:00",
        "local_time": "2026-07-01 14:00:00",
        "weekday": "Wednesday",
        "utc_offset": "+02:00",
        "abbreviation": "CEST",
    }


async def test_new_york_in_winter_is_on_standard_time() -> None:
    value = await _now({"timezone": "America/New_York"}, WINTER)

    assert value["iso"] == "2026-01-15T07:00:00-05:00"
    assert value["utc_offset"] == "-05:00"
    assert value["abbreviation"] == "EST"
    assert value["weekday"] == "Thursday"


async def test_utc_is_the_default() -> None:
    value = await _now({})

    assert value["timezone"] == "UTC"
    assert value["iso"] == "2026-07-01T12:00:00+00:00"
    assert value["utc_offset"] == "+00:00"
    assert value["abbreviation"] == "UTC"


async def test_the_local_date_can_differ_from_the_utc_date() -> None:
    late = datetime(2026, 7, 1, 22, 30, 15, tzinfo=UTC)

    value = await _now({"timezone": "tokyo"}, late)

    assert value["timezone"] == "Asia/Tokyo"
    assert value["local_time"] == "2026-07-02 07:30:15"
    assert value["weekday"] == "Thursday"
    assert value["utc_offset"] == "+09:00"
    assert value["abbreviation"] == "JST"


async def test_half_hour_offsets_are_formatted() -> None:
    value = await _now({"timezone": "Mumbai"})

    assert value["timezone"] == "Asia/Kolkata"
    assert value["utc_offset"] == "+05:30"
    assert value["local_time"] == "2026-07-01 17:30:00"


async def test_the_default_clock_is_the_real_time() -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")
    before = datetime.now(UTC).replace(microsecond=0)

    output = await CurrentTimeTool().execute({"timezone": "Asia/Tokyo"}, _context(chain))

    reported = datetime.fromisoformat(output.value["iso"])
    assert before <= reported <= datetime.now(UTC)
    assert output.value["utc_offset"] == "+09:00"


@pytest.mark.parametrize(
    ("name", "zone"),
    [
        ("Europe/Paris", "Europe/Paris"),
        ("europe/paris", "Europe/Paris"),
        (" America/New_York ", "America/New_York"),
        ("UTC", "UTC"),
        ("utc", "UTC"),
        ("GMT", "GMT"),
        ("Z", "UTC"),
        ("Etc/GMT+5", "Etc/GMT+5"),
        ("new york", "America/New_York"),
        ("New-York", "America/New_York"),
        ("São Paulo", "America/Sao_Paulo"),
        ("sao paulo", "America/Sao_Paulo"),
        ("tokyo", "Asia/Tokyo"),
        ("Hong Kong", "Asia/Hong_Kong"),
        ("Port au Prince", "America/Port-au-Prince"),
        ("Buenos Aires", "America/Argentina/Buenos_Aires"),
        ("Zürich", "Europe/Zurich"),
        ("Mexico City", "America/Mexico_City"),
        ("San Francisco", "America/Los_Angeles"),
        ("beijing", "Asia/Shanghai"),
        ("New Delhi", "Asia/Kolkata"),
        ("Bengaluru", "Asia/Kolkata"),
        ("Washington, D.C.", "America/New_York"),
        ("Munich", "Europe/Berlin"),
        ("Barcelona", "Europe/Madrid"),
        ("Geneva", "Europe/Zurich"),
        ("Houston", "America/Chicago"),
        ("Rio de Janeiro", "America/Sao_Paulo"),
        ("Tel Aviv", "Asia/Jerusalem"),
        ("Kiev", "Europe/Kyiv"),
        ("Osaka", "Asia/Tokyo"),
    ],
)
def test_zone_and_place_names_resolve(name: str, zone: str) -> None:
    assert resolve_timezone(name) == zone


@pytest.mark.parametrize("name", ["Mars/Base", "", "Atlantis", "localtime"])
def test_unknown_names_resolve_to_none(name: str) -> None:
    assert resolve_timezone(name) is None


def test_every_alias_points_at_a_real_zone() -> None:
    zones = available_timezones()

    assert {zone for zone in _PLACE_ALIASES.values() if zone not in zones} == set()


async def test_an_unknown_zone_is_an_invalid_argument_with_suggestions() -> None:
    chain = ReasoningChain(task_id="t", agent_id="a")

    with pytest.raises(InvalidToolArguments) as caught:
        await CurrentTimeTool().execute({"timezone": "Europe/Pariss"}, _context(chain))

    [error] = caught.value.field_errors
    assert error.field == "timezone"
    assert error.message.startswith(
        "unknown time zone 'Europe/Pariss'; use an IANA name such as 'Europe/Paris' "
        "(did you mean: Europe/Paris"
    )


async def test_executor_reports_an_unknown_zone_as_invalid_arguments() -> None:
    result = await _run({"timezone": "Tokio"})

    assert not result.success
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "timezone: unknown time zone 'Tokio'" in result.error
    assert "did you mean: Asia/Tokyo" in result.error


async def test_executor_names_an_unexpected_argument() -> None:
    result = await _run({"timezone": "UTC", "format": "iso"})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert result.error is not None
    assert "format: is not a known argument (expected: timezone)" in result.error


async def test_executor_summarises_the_result_with_the_template() -> None:
    result = await _run({"timezone": "Europe/Paris"})

    assert result.success
    assert result.value["timezone"] == "Europe/Paris"
    assert result.result_step.visibility.summary == "2026-07-01 14:00:00 in Europe/Paris"


def test_definition_describes_the_tool() -> None:
    definition = CurrentTimeTool().definition

    assert definition.name == "current_time"
    assert definition.type is ToolType.SKILL
    assert definition.retry == NO_RETRY
    assert definition.timeout_s == 5
    assert definition.parameters["properties"]["timezone"]["default"] == "UTC"
    assert "required" not in definition.parameters
    assert definition.parameters["additionalProperties"] is False
    assert definition.visibility.summary_template == "{local_time} in {timezone}"
