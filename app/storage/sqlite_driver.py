"""The embedded database's driver: aiosqlite, with one hand-off to its thread per statement.

aiosqlite makes every call on its sqlite3 connection in a thread of its own, and SQLAlchemy
makes four per statement: open a cursor, execute, read the rows, close the cursor; and one
more to roll back a connection that is given back to the pool, even when nothing was begun.
Each is a wake-up of that thread and then of the event loop (two context switches, a future,
a write to the loop's self-pipe), and they cost more than most statements. Here:

- a statement's rows are read in the same hand-off as its execution (SQLAlchemy reads them
  all at once anyway: the service opens no server-side cursor on SQLite);
- a cursor is opened and closed where its caller is: neither reads or writes the database
  (the connection is shared between threads, as SQLAlchemy opens it, and sqlite3 is
  serialised);
- a commit or rollback with no transaction open is not sent: sqlite3 would do nothing;
- a transaction of many statements can go as one hand-off (`EmbeddedConnection.transact`):
  its work runs on the connection's thread through a synchronous SQLAlchemy connection over
  the same sqlite3 connection (same dialect, types and JSON serializer), each statement at
  about a fifth of the CPU of an asynchronous one (~30 against ~160 µs for a trivial one).
"""

import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

import aiosqlite
from aiosqlite.context import contextmanager
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import URL
from sqlalchemy.pool import StaticPool

_T = TypeVar("_T")

ITER_CHUNK_SIZE = 64  # aiosqlite's default


def _execute_and_read(cursor: sqlite3.Cursor, sql: str, parameters: Any) -> list[Any] | None:
    cursor.execute(sql, parameters)
    return cursor.fetchall() if cursor.description is not None else None


class _Cursor(aiosqlite.Cursor):
    """Reads a statement's rows with its execution, and serves them from here."""

    def __init__(self, conn: aiosqlite.Connection, cursor: sqlite3.Cursor) -> None:
        super().__init__(conn, cursor)
        self._rows: list[Any] | None = None
        self._next = 0

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> "_Cursor":
        run: Callable[..., Awaitable[list[Any] | None]] = self._execute  # untyped upstream
        self._rows = None  # a statement that fails leaves no rows of the one before
        self._rows = await run(
            _execute_and_read, self._cursor, sql, [] if parameters is None else parameters
        )
        self._next = 0
        return self

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> "_Cursor":
        self._rows = None
        await super().executemany(sql, parameters)
        return self

    async def executescript(self, sql_script: str) -> "_Cursor":
        self._rows = None
        await super().executescript(sql_script)
        return self

    def _take(self, count: int) -> list[Any]:
        assert self._rows is not None
        rows = self._rows[self._next : self._next + count]
        self._next += len(rows)
        return rows

    async def fetchone(self) -> Any:
        if self._rows is None:
            return await super().fetchone()
        rows = self._take(1)
        return rows[0] if rows else None

    async def fetchmany(self, size: int | None = None) -> Iterable[Any]:
        if self._rows is None:
            return await super().fetchmany(size)
        return self._take(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> Iterable[Any]:
        if self._rows is None:
            return await super().fetchall()
        return self._take(len(self._rows))

    async def close(self) -> None:
        self._rows = None
        self._cursor.close()


class EmbeddedConnection(aiosqlite.Connection):
    def __init__(
        self,
        connector: Callable[[], sqlite3.Connection],
        iter_chunk_size: int,
        engine_options: Mapping[str, Any],
    ) -> None:
        super().__init__(connector, iter_chunk_size)
        self._engine_options = engine_options
        self._engine: Engine | None = None  # made on the thread, used only there

    @contextmanager
    async def cursor(self) -> aiosqlite.Cursor:
        return _Cursor(self, self._conn.cursor())

    async def transact(self, work: Callable[[Connection], _T]) -> _T:
        """`work` in a transaction of its own, in one hand-off to the connection's thread:
        committed when it returns, rolled back when it raises. Nothing else may use the
        connection meanwhile (the caller has it checked out, with no transaction begun)."""
        run: Callable[..., Awaitable[_T]] = self._execute  # untyped upstream
        return await run(self._transact, work)

    def _transact(self, work: Callable[[Connection], _T]) -> _T:
        if self._engine is None:
            # The pool hands out this very sqlite3 connection, configured already; the
            # engine is never disposed (that would close it), only dropped with this one.
            self._engine = create_engine(
                "sqlite://",
                creator=lambda: self._conn,
                poolclass=StaticPool,
                **self._engine_options,
            )
        with self._engine.begin() as connection:
            return work(connection)

    async def commit(self) -> None:
        if self._conn.in_transaction:
            await super().commit()

    async def rollback(self) -> None:
        if self._conn.in_transaction:
            await super().rollback()


def connector(url: URL, engine_options: Mapping[str, Any]) -> Callable[[], aiosqlite.Connection]:
    """SQLAlchemy's `async_creator` for `url`: a connection opened with the arguments
    SQLAlchemy's own aiosqlite dialect would give sqlite3; `engine_options` are those of the
    asynchronous engine that its transactions in one hand-off use too (its JSON serializer)."""
    args, kwargs = SQLiteDialect_aiosqlite().create_connect_args(url)

    def connect() -> aiosqlite.Connection:
        connection = EmbeddedConnection(
            partial(sqlite3.connect, *args, **kwargs), ITER_CHUNK_SIZE, engine_options
        )
        # As SQLAlchemy does for the connections it opens: its thread never holds up exit.
        connection._thread.daemon = True
        return connection

    return connect
