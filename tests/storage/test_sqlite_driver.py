"""The embedded database's driver: one hand-off to aiosqlite's thread per statement, or per
transaction of many, with the same answers SQLAlchemy gets from aiosqlite itself."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    MetaData,
    Numeric,
    Table,
    Uuid,
    insert,
    select,
    text,
)

from app.storage import Database
from tests.storage.hand_offs import HandOffs


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


async def test_a_transaction_in_one_hand_off_commits_whole_or_not_at_all(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write(connection: Connection) -> list[tuple[Any, ...]]:
        connection.execute(text("INSERT INTO t (id, name) VALUES (:id, :name)"), ROWS)
        updated = connection.execute(text("UPDATE t SET name = 'x' WHERE id > 1"))
        assert updated.rowcount == 2
        returned = connection.execute(text("DELETE FROM t WHERE id = 3 RETURNING id, name"))
        return [tuple(row) for row in returned]

    hand_offs = HandOffs(monkeypatch)
    assert await database.transact_here(write) == [(3, "x")]
    assert hand_offs.count == 1

    def write_then_fail(connection: Connection) -> None:
        connection.execute(text("DELETE FROM t"))
        connection.execute(text("INSERT INTO t (id, name) VALUES (9, 'z')"))
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        await database.transact_here(write_then_fail)
    async with database.read() as connection:
        kept = (await connection.execute(text("SELECT id, name FROM t ORDER BY id"))).all()
    assert [tuple(row) for row in kept] == [(1, "a"), (2, "x")]
    # The connection goes on serving statements on the loop's side as before.
    async with database.transaction() as connection:
        await connection.execute(text("DELETE FROM t WHERE id = 1"))
    async with database.read() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 1


ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]
TYPED = Table(
    "typed",
    MetaData(),
    Column("id", Uuid, primary_key=True),
    Column("document", JSON),
    Column("at", DateTime(timezone=True)),
    Column("amount", Numeric(18, 10)),
)


async def test_a_row_written_in_one_hand_off_is_stored_as_the_loop_s_statements_store_it(
    database: Database,
) -> None:
    async with database.transaction() as connection:
        await connection.run_sync(TYPED.metadata.create_all)
    document = {"text": "café \u2028", "n": [1, 2.5, None]}
    at = datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC)
    ids = [uuid4(), uuid4()]
    rows = [
        {"id": row_id, "document": document, "at": at, "amount": Decimal("0.0000012345")}
        for row_id in ids
    ]
    async with database.transaction() as connection:
        await connection.execute(insert(TYPED), [rows[0]])
    await database.transact_here(lambda connection: connection.execute(insert(TYPED), [rows[1]]))

    async with database.read() as connection:
        stored = (await connection.execute(text("SELECT * FROM typed"))).all()
        read = (await connection.execute(select(TYPED).order_by(TYPED.c.at))).all()
    by_id = {row[0]: tuple(row[1:]) for row in stored}
    # The same text in every column: the same dialect, types and JSON serializer.
    assert by_id[ids[0].hex] == by_id[ids[1].hex]
    assert [row.document for row in read] == [document, document]
    assert {row.amount for row in read} == {Decimal("0.0000012345")}
