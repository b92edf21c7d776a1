"""Query parameter helpers shared by routers."""

import base64
import binascii
from datetime import UTC, datetime

from app.storage.pagination import InvalidCursor


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
        return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode()).decode()
    except (ValueError, binascii.Error) as exc:
        raise InvalidCursor("the cursor is not one this service issued") from exc


def decode_int_cursor(text: str) -> int:
    value = decode_key_cursor(text)
    if not (value.isascii() and value.isdecimal()):
        raise InvalidCursor("the cursor is not one this service issued")
    return int(value)
