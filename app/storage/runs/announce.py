"""Transactions that tell other instances what they changed (ids only, see `notify`)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import func, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.storage.database import Database
from app.storage.notify import Notices


class Notes:
    """The notices of one transaction: on Postgres a NOTIFY within it, delivered to every
    instance at COMMIT; on the embedded database delivered to this process's listeners after
    the COMMIT. A transaction that fails announces nothing."""

    def __init__(self, connection: AsyncConnection, *, local: bool) -> None:
        self._connection = connection
        self._local = local
        self.after_commit: list[tuple[str, str]] = []

    async def send(self, channel: str, payload: str = "") -> None:
        if self._local:
            self.after_commit.append((channel, payload))
        else:
            await self._connection.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": channel, "payload": payload},
            )


class RunStore:
    """What every store of runs shares: the database, this process's end of the notices, and
    transactions that announce what they changed."""

    def __init__(self, database: Database, notices: Notices) -> None:
        self.database = database
        self.notices = notices

    @asynccontextmanager
    async def announcing(self) -> AsyncIterator[tuple[AsyncConnection, Notes]]:
        """A transaction and the notices it announces (`notes.send`)."""
        async with self.database.transaction() as connection:
            notes = Notes(connection, local=self.database.is_sqlite)
            yield connection, notes
        for channel, payload in notes.after_commit:
            self.notices.deliver(channel, payload)

    def now(self) -> Any:
        """The time leases and backoffs are judged by: the database's clock on Postgres (one
        clock for every instance), this process's on the embedded database (one process)."""
        return utc_now() if self.database.is_sqlite else func.now()
