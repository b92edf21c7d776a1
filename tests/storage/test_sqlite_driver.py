"""The embedded database's driver: one hand-off to aiosqlite's thread per statement, with the
same answers SQLAlchemy gets from aiosqlite itself."""

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from sqlalchemy import text

from app.storage import Database


class HandOffs:
    """Counts the calls queued to the connections' threads (each still made)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        queue: Callable[..., Any] = aiosqlite.Connection._execute

        async def counted(connection: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await queue(connection, fn, *args, **kwargs)

        monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    async with database.transaction() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)"))
    yield database
    await database.dispose()


async def test_a_statement_and_its_rows_take_one_hand_off(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"id": n, "name": f"n{n}"} for n in range(150)]
    async with database.transaction() as connection:
        await connection.execute(text("INSERT INTO t (id, name) VALUES (:id, :name)"), rows)
    hand_offs = HandOffs(monkeypatch)

    async with database.read() as connection:
        names = (await connection.execute(text("SELECT name FROM t ORDER BY id"))).scalars()
        first = (await connection.execute(text("SELECT name FROM t WHERE id = 7"))).scalar()
        none = (await connection.execute(text("SELECT name FROM t WHERE id = -1"))).first()

    assert list(names) == [f"n{n}" for n in range(150)]
    assert first == "n7"
    assert none is None
    # Three statements; nothing begun, so nothing rolled back when the connection goes back.
    assert hand_offs.count == 3


async def test_writes_count_return_and_commit_or_roll_back_as_before(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    hand_offs = HandOffs(monkeypatch)
    async with database.transaction() as connection:
        await connection.execute(text("INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b')"))
        updated = await connection.execute(text("UPDATE t SET name = 'c' WHERE id <= 2"))
        returned = await connection.execute(
            text("UPDATE t SET name = 'd' WHERE id = 1 RETURNING id, name")
        )
        assert updated.rowcount == 2
        assert [tuple(row) for row in returned] == [(1, "d")]
    # Three statements and the commit.
    assert hand_offs.count == 4

    async def delete_then_fail() -> None:
        async with database.transaction() as connection:
            await connection.execute(text("DELETE FROM t"))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        await delete_then_fail()
    async with database.read() as connection:
        kept = (await connection.execute(text("SELECT id, name FROM t ORDER BY id"))).all()

    assert [tuple(row) for row in kept] == [(1, "d"), (2, "c")]
