"""Time, query parameter and cursor types shared by routers: strict, and bounded so that no
value a client can send reaches the database out of range."""

import base64
import binascii
from datetime import UTC, date, datetime
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from app.storage.pagination import MAX_CURSOR_MOMENT, MIN_CURSOR_MOMENT, InvalidCursor

# Times a query names are read within these bounds: no data exists outside them, and inside
# them every sum or difference a route makes stays a valid time.
EARLIEST = MIN_CURSOR_MOMENT
LATEST = MAX_CURSOR_MOMENT
MAX_INT64 = 2**63 - 1


def _moment(value: object) -> datetime:
    """An ISO 8601 time (`2026-01-31`, `2026-01-31T12:00:00Z`...; without an offset: UTC),
    clamped to [EARLIEST, LATEST]. Numbers are refused: `0.5` is not a time."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("not an ISO 8601 time, e.g. 2026-01-31T12:00:00Z") from None
    else:
        raise ValueError("not an ISO 8601 time, e.g. 2026-01-31T12:00:00Z")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # an offset past year 1 or 9999
        return EARLIEST if moment.year < 5000 else LATEST
    return min(max(moment, EARLIEST), LATEST)


def _day(value: object) -> date:
    """An ISO 8601 day (`2026-01-31`), clamped to the days of [EARLIEST, LATEST]."""
    if isinstance(value, date) and not isinstance(value, datetime):
        day = value
    elif isinstance(value, str):
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("not an ISO 8601 day, e.g. 2026-01-31") from None
    else:
        raise ValueError("not an ISO 8601 day, e.g. 2026-01-31")
    return min(max(day, EARLIEST.date()), LATEST.date())


Moment = Annotated[datetime, BeforeValidator(_moment)]
"""A query's time: ISO 8601 only, naive means UTC, clamped to the times data can have."""

Day = Annotated[date, BeforeValidator(_day)]
"""A query's day: ISO 8601 only, clamped like `Moment`."""


def _in_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("give a time zone (e.g. `Z`)")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is in year 10000 in UTC
        raise ValueError("out of range: in UTC it falls outside the years 1 to 9999") from None


Instant = Annotated[datetime, AfterValidator(_in_utc)]
"""A time a body sets (an expiry): with an offset, read in UTC; one that falls outside the
years 1 to 9999 in UTC is refused (422 naming the field), never clamped."""


def aware(moment: datetime | None) -> datetime | None:
    """Times without an offset are UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def encode_key_cursor(value: int | str) -> str:
    """An opaque cursor over a single sort key (a tenant id, an audit event id)."""
    return base64.urlsafe_b64encode(f"{value}".encode()).decode().rstrip("=")


def decode_key_cursor(text: str) -> str:
    try:
        value = base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode()).decode()
    except (ValueError, binascii.Error) as exc:
        raise InvalidCursor("the cursor is not one this service issued") from exc
    if not value.isprintable():
        raise InvalidCursor("the cursor is not one this service issued")
    return value


def decode_int_cursor(text: str) -> int:
    value = decode_key_cursor(text)
    if not (value.isascii() and value.isdecimal() and len(value) <= 19):
        raise InvalidCursor("the cursor is not one this service issued")
    number = int(value)
    if number > MAX_INT64:
        raise InvalidCursor("the cursor is not one this service issued")
    return number
