"""The current_time skill, and the resolver that turns a zone or place name into an IANA zone."""

import difflib
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import FieldError, InvalidToolArguments
from app.tools.models import (
    NO_RETRY,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)

TOOL_NAME = "current_time"
DEFAULT_TIMEZONE = "UTC"

# Places people name that are not (or not canonically) the last component of a zone name.
_PLACE_ALIASES: dict[str, str] = {
    "San Francisco": "America/Los_Angeles",
    "Seattle": "America/Los_Angeles",
    "San Diego": "America/Los_Angeles",
    "Silicon Valley": "America/Los_Angeles",
    "Beijing": "Asia/Shanghai",
    "Shenzhen": "Asia/Shanghai",
    "Mumbai": "Asia/Kolkata",
    "Delhi": "Asia/Kolkata",
    "New Delhi": "Asia/Kolkata",
    "Bangalore": "Asia/Kolkata",
    "Bengaluru": "Asia/Kolkata",
    "Washington": "America/New_York",
    "Washington DC": "America/New_York",
    "Washington D.C.": "America/New_York",
    "Boston": "America/New_York",
    "Miami": "America/New_York",
    "Atlanta": "America/New_York",
    "Philadelphia": "America/New_York",
    "Munich": "Europe/Berlin",
    "Frankfurt": "Europe/Berlin",
    "Hamburg": "Europe/Berlin",
    "Barcelona": "Europe/Madrid",
    "Milan": "Europe/Rome",
    "Osaka": "Asia/Tokyo",
    "Kyoto": "Asia/Tokyo",
    "Geneva": "Europe/Zurich",
    "Dallas": "America/Chicago",
    "Houston": "America/Chicago",
    "Austin": "America/Chicago",
    "Rio de Janeiro": "America/Sao_Paulo",
    "Rio": "America/Sao_Paulo",
    "Tel Aviv": "Asia/Jerusalem",
    "Kiev": "Europe/Kyiv",
    "Calcutta": "Asia/Kolkata",
    "Saigon": "Asia/Ho_Chi_Minh",
    "Z": "UTC",
}
# When several zones share a last component (US/Eastern, Canada/Eastern), the first area
# listed wins; then the longer, canonical name (America/Argentina/Buenos_Aires).
_AREA_PREFERENCE = (
    "Europe", "America", "Asia", "Africa", "Australia", "Pacific", "Atlantic", "Indian",
    "Antarctica", "Arctic", "US", "Canada",
)  # fmt: skip
_NOT_PLACES = ("Etc/", "SystemV/", "posix", "right/")
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})
# Not strftime("%A"), which follows the process locale.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _normalize(name: str) -> str:
    """A comparison key: accents dropped, case folded, runs of other characters as '_'."""
    decomposed = unicodedata.normalize("NFKD", name)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return re.sub(r"[^0-9a-z+]+", "_", plain).strip("_")


class _ZoneIndex:
    """Every IANA zone by exact (case-folded) name, by normalised full name and by place."""

    def __init__(self, zones: set[str]) -> None:
        zones = zones - _NOT_ZONES
        self.exact = {zone.casefold(): zone for zone in zones}
        self.by_key: dict[str, str] = {}
        for zone in sorted(zones, key=_preference):
            self.by_key.setdefault(_normalize(zone), zone)
        # Aliases before last components: "Tel Aviv" is Asia/Jerusalem, not the old link.
        for place, zone in _PLACE_ALIASES.items():
            self.by_key.setdefault(_normalize(place), zone)
        for zone in sorted(zones, key=_preference):
            if not zone.startswith(_NOT_PLACES):
                self.by_key.setdefault(_normalize(zone.rsplit("/", 1)[-1]), zone)

    def resolve(self, name: str) -> str | None:
        text = name.strip()
        return self.exact.get(text.casefold()) or self.by_key.get(_normalize(text))

    def suggestions(self, name: str, limit: int = 3) -> list[str]:
        keys = difflib.get_close_matches(_normalize(name), self.by_key, n=limit * 3)
        return list(dict.fromkeys(self.by_key[key] for key in keys))[:limit]


def _preference(zone: str) -> tuple[int, int, str]:
    area = zone.split("/", 1)[0] if "/" in zone else ""
    rank = _AREA_PREFERENCE.index(area) if area in _AREA_PREFERENCE else len(_AREA_PREFERENCE)
    return rank, -zone.count("/"), zone


@cache
def _index() -> _ZoneIndex:
    # Built on first use: scanning the zone database is too slow to do at import.
    return _ZoneIndex(available_timezones())


def resolve_timezone(name: str) -> str | None:
    """The IANA zone `name` denotes, or None.

    Accepts an IANA name in any case ('europe/paris'), 'UTC', 'GMT' or 'Z', a place that ends
    a zone name, ignoring case, accents and spaces ('new york', 'São Paulo', 'tokyo'), or a
    well-known place that is not a zone name ('San Francisco', 'Mumbai').
    """
    return _index().resolve(name)


def _format_offset(offset: timedelta | None) -> str:
    seconds = int((offset or timedelta()).total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _definition() -> ToolDefinition:
    return ToolDefinition(
        name=TOOL_NAME,
        type=ToolType.SKILL,
        description=(
            "Returns the current date and time in a time zone: local time, weekday, UTC "
            "offset and zone abbreviation. Use it whenever the answer depends on today's date "
            "or the time somewhere."
        ),
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "default": DEFAULT_TIMEZONE,
                    "minLength": 1,
                    "maxLength": 100,
                    "description": "An IANA time zone such as 'Europe/Paris' or "
                    "'America/New_York', or a well-known city name such as 'Tokyo'",
                }
            },
            "additionalProperties": False,
        },
        returns_description="The resolved IANA zone, ISO 8601 timestamp, local time, weekday, "
        "UTC offset and abbreviation.",
        timeout_s=5,
        retry=NO_RETRY,
        idempotent=True,
        visibility=ToolVisibilityConfig(summary_template="{local_time} in {timezone}"),
    )


class CurrentTimeTool(BaseTool):
    """The time now in a zone. `clock` returns an aware datetime; it is injectable for tests."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or _utc_now
        self._definition = _definition()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        requested: str = arguments.get("timezone", DEFAULT_TIMEZONE)
        zone = resolve_timezone(requested)
        if zone is None:
            raise InvalidToolArguments(
                TOOL_NAME, [FieldError("timezone", _unknown_zone_message(requested))]
            )
        local = self._clock().astimezone(ZoneInfo(zone))
        return ToolOutput(
            value={
                "timezone": zone,
                "iso": local.isoformat(timespec="seconds"),
                "local_time": local.strftime("%Y-%m-%d %H:%M:%S"),
                "weekday": _WEEKDAYS[local.weekday()],
                "utc_offset": _format_offset(local.utcoffset()),
                "abbreviation": local.tzname(),
            }
        )


def _unknown_zone_message(requested: str) -> str:
    message = f"unknown time zone {requested!r}; use an IANA name such as 'Europe/Paris'"
    if suggestions := _index().suggestions(requested):
        message += f" (did you mean: {', '.join(suggestions)}?)"
    return message
