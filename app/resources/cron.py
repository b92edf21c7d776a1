"""Cron expressions in an IANA time zone: checked, and their next firing after a moment."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter  # type: ignore[import-untyped]


class InvalidCron(ValueError):
    """A cron expression or time zone this service cannot fire by."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (`InvalidCron` when there is none of that name)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidCron(f"{name!r} is not an IANA time zone (e.g. `Europe/Berlin`)") from exc


def check_cron(expression: str) -> str:
    """A five-field expression (minute hour day month weekday) or a `@daily`-style alias;
    seconds and years are refused: schedules fire at most once a minute."""
    fields = expression.split()
    aliased = len(fields) == 1 and fields[0].startswith("@")
    if not aliased and len(fields) != 5:
        raise InvalidCron(
            f"{expression!r} has {len(fields)} fields; give five (minute hour day month "
            "weekday), e.g. `*/15 * * * *`"
        )
    if not croniter.is_valid(expression):
        raise InvalidCron(f"{expression!r} is not a valid cron expression")
    return expression


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """The first moment strictly after `after` the expression names, read in `timezone`
    (across daylight-saving changes as that zone's clocks go), in UTC."""
    local = after.astimezone(zone(timezone))
    following: datetime = croniter(expression, local).get_next(datetime)
    return following.astimezone(UTC)
