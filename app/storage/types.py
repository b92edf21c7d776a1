"""Column types that behave the same on Postgres and SQLite."""

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer, Numeric, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import DateTime, TypeDecorator

from app.storage.text import storable_json

# Postgres stores JSON as JSONB (queryable, compact); SQLite as text.
JSONDocument = JSON().with_variant(JSONB(), "postgresql")

# SQLite only autoincrements INTEGER PRIMARY KEY columns.
BigIntegerKey = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend; SQLite hands back naive values."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use datetime.now(UTC)")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class DecimalText(TypeDecorator[Decimal]):
    """Exact decimals on SQLite, which has no decimal type (it would round through float)."""

    impl = String(48)
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(value)


# US dollars to 1e-12 (the precision of per-token prices).
Money = Numeric(24, 12, asdecimal=True).with_variant(DecimalText(), "sqlite")


class RawJSON(str):
    """JSON text that is already serialized: stored as is, not encoded a second time."""

    __slots__ = ()


def dump_json(value: Any) -> str:
    """The engines' JSON serializer: compact, strict about what JSON is, and storable (see
    `app.storage.text`) on every backend."""
    if isinstance(value, RawJSON):
        return storable_json(value)
    return storable_json(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    )
