"""Keyset pagination: an opaque cursor of (timestamp, id), newest first."""

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar
from uuid import UUID

from sqlalchemy import ColumnElement, and_, or_
from sqlalchemy.sql.elements import KeyedColumnElement

from app.errors import OmniForgeError

T = TypeVar("T")

MAX_PAGE_SIZE = 200
# No row of ours was made outside these times: a cursor naming one was not issued here.
MIN_CURSOR_MOMENT = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CURSOR_MOMENT = datetime(9000, 1, 1, tzinfo=UTC)


class InvalidCursor(OmniForgeError, ValueError):
    """A cursor this service did not issue."""


@dataclass(frozen=True, slots=True)
class Cursor:
    at: datetime
    id: UUID

    def encode(self) -> str:
        raw = json.dumps([self.at.isoformat(), str(self.id)]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> "Cursor":
        try:
            padded = text + "=" * (-len(text) % 4)
            at, id_ = json.loads(base64.urlsafe_b64decode(padded.encode()))
            cursor = cls(datetime.fromisoformat(at), UUID(id_))
        except (ValueError, TypeError, AttributeError, RecursionError, binascii.Error) as exc:
            raise InvalidCursor("the cursor is not one this service issued") from exc
        if cursor.at.tzinfo is None:
            raise InvalidCursor("the cursor is not one this service issued")
        try:
            at = cursor.at.astimezone(UTC)
        except OverflowError as exc:
            raise InvalidCursor("the cursor is not one this service issued") from exc
        if not MIN_CURSOR_MOMENT <= at < MAX_CURSOR_MOMENT:
            raise InvalidCursor("the cursor is not one this service issued")
        return cursor

    def before(
        self, at_column: KeyedColumnElement[datetime], id_column: KeyedColumnElement[UUID]
    ) -> ColumnElement[bool]:
        """Rows after this cursor in newest-first order."""
        return or_(at_column < self.at, and_(at_column == self.at, id_column < self.id))


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None

    @classmethod
    def of(cls, fetched: list[T], limit: int, key: Callable[[T], Cursor]) -> "Page[T]":
        """A page from up to `limit + 1` fetched items: the extra one says there is more."""
        items = fetched[:limit]
        more = len(fetched) > limit
        return cls(items, key(items[-1]).encode() if more else None)
