"""Cron expressions in an IANA time zone: checked, and their next firing after a moment."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]

from app.errors import OmniForgeError

MAX_YEARS_BETWEEN_FIRINGS = 8
"""The longest a schedule may wait for its next firing: a leap day's (`0 0 29 2 *`) waits at
most 8 years (2096 to 2104); a firing further away is an expression that names a date no
calendar holds often enough to schedule by (a Friday 29 February, `0 0 * 2 5#5`)."""
# Looked ahead to tell "never" from "too rarely" (croniter's own horizon).
_NEVER_YEARS = 50


class InvalidCron(OmniForgeError, ValueError):
    """A cron expression or time zone this service cannot fire by."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (`InvalidCron` when there is none of that name)."""
    try:
        return ZoneInfo(name)
    # A name of the zone database's directories (`Europe`) or of a file that is not a zone
    # raises OSError or ValueError, not ZoneInfoNotFoundError.
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidCron(f"{name!r} is not an IANA time zone (e.g. `Europe/Berlin`)") from exc


def check_cron(expression: str, *, now: datetime | None = None) -> str:
    """A five-field expression (minute hour day month weekday) or a `@daily`-style alias;
    seconds and years are refused: schedules fire at most once a minute. It must fire: an
    expression naming no date (`0 0 30 2 *`) is refused, and so is one whose next two firings
    after `now` are not each within `MAX_YEARS_BETWEEN_FIRINGS`."""
    fields = expression.split()
    aliased = len(fields) == 1 and fields[0].startswith("@")
    if not aliased and len(fields) != 5:
        raise InvalidCron(
            f"{expression!r} has {len(fields)} fields; give five (minute hour day month "
            "weekday), e.g. `*/15 * * * *`"
        )
    if not croniter.is_valid(expression):
        raise InvalidCron(f"{expression!r} is not a valid cron expression")
    first = next_fire(expression, "UTC", now or datetime.now(UTC))
    next_fire(expression, "UTC", first)
    return expression


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """The first moment strictly after `after` the expression names, read in `timezone`
    (across daylight-saving changes as that zone's clocks go), in UTC. `InvalidCron` when
    there is none within `MAX_YEARS_BETWEEN_FIRINGS`."""
    local = after.astimezone(zone(timezone))
    try:
        following: datetime = croniter(
            expression, local, max_years_between_matches=MAX_YEARS_BETWEEN_FIRINGS
        ).get_next(datetime)
    except CroniterBadDateError:
        raise _never_or_rarely(expression, local) from None
    return following.astimezone(UTC)


def _never_or_rarely(expression: str, local: datetime) -> InvalidCron:
    try:
        later: datetime = croniter(
            expression, local, max_years_between_matches=_NEVER_YEARS
        ).get_next(datetime)
    except CroniterBadDateError:
        return InvalidCron(
            f"{expression!r} never fires: it names no date the calendar has (e.g. 30 February)"
        )
    return InvalidCron(
        f"{expression!r} fires too rarely to schedule by (next on {later.date().isoformat()}, "
        f"more than {MAX_YEARS_BETWEEN_FIRINGS} years away); a schedule must fire at least "
        f"once every {MAX_YEARS_BETWEEN_FIRINGS} years"
    )
