"""The async engine: one per process, created at start-up, disposed at shutdown."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from app.storage import sqlite_driver
from app.storage.types import dump_json

_T = TypeVar("_T")


class Database:
    """Postgres through asyncpg, or SQLite through aiosqlite, behind the same calls.

    `transaction()` is the unit of work: it commits when the block ends and rolls back when it
    raises. SQLite allows one writer at a time, so its pool holds a single connection and
    transactions queue for it instead of failing with "database is locked".
    """

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = make_url(url)
        options: dict[str, Any] = {"json_serializer": dump_json}
        if self.is_sqlite:
            database = self.url.database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            options.update(pool_size=1, max_overflow=0, pool_timeout=60)
            # aiosqlite with fewer hand-offs to its thread (see `sqlite_driver`).
            options["async_creator"] = sqlite_driver.connector(
                self.url, {"json_serializer": dump_json}
            )
        else:
            # No pre-ping (a round trip per checkout): a connection found dead fails its one
            # statement, SQLAlchemy then drops the whole pool, and run writes are retried.
            # Up to twice `pool_size` open, each opened when first needed and then kept: an
            # overflow connection would be closed on check-in and reopened by the next burst
            # (a new backend on the server each time).
            # Last in, first out: a quiet spell reuses the connection (and server backend)
            # that served last, warm, instead of going round every one a burst opened.
            options.update(
                pool_size=2 * pool_size, max_overflow=0, pool_recycle=1800, pool_use_lifo=True
            )
        self.engine: AsyncEngine = create_async_engine(self.url, **options)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.begin() as connection:
            yield connection

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A connection whose every statement commits on its own (no BEGIN/COMMIT round
        trips): for single statements that are atomic by themselves."""
        async with self.engine.connect() as connection:
            yield await connection.execution_options(isolation_level="AUTOCOMMIT")

    async def transact_here(self, work: Callable[[Connection], _T]) -> _T:
        """The embedded database: `work` — statements on a synchronous connection — in one
        transaction, in one hand-off to the database's thread instead of one per statement;
        committed when it returns, rolled back when it raises. It runs off the event loop:
        it must not touch anything of the loop's."""
        assert self.is_sqlite, "one hand-off is the embedded database's"
        async with self.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            assert isinstance(driver, sqlite_driver.EmbeddedConnection)
            return await driver.transact(work)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads only; nothing it does is committed."""
        async with self.engine.connect() as connection:
            yield connection

    async def dispose(self) -> None:
        await self.engine.dispose()


# How long a SQLite connection waits for another's write lock before it fails.
SQLITE_BUSY_TIMEOUT_MS = 10_000


def _sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    # The wait for a lock first: switching an empty database to WAL takes its lock too, and
    # a connection opened while another process holds it would fail at once without it.
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
