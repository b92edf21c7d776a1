"""A new task and its chain: on Postgres a plain one (no sub-agent, idempotency key, limit on
unfinished tasks or conversation) is stored by one statement; every column comes back as given
and the rest keep their defaults, on both databases, and a queued task is announced."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy import event, select

from app.chain import ChainStatus, TaskState
from app.chain.models import ChainMetrics
from app.storage import Database
from app.storage.notify import QUEUE
from app.storage.runs import RunStores
from app.storage.tables import reasoning_chains
from app.storage.tasks import TaskRepository
from app.storage.types import RawJSON
from tests.conftest import fresh_database
from tests.storage.hand_offs import HandOffs


async def _engine(kind: str, directory: Path) -> AsyncIterator[Database]:
    async with fresh_database(kind, directory) as url:
        database = Database(url)
        yield database
        await database.dispose()


@pytest.fixture
async def postgres(tmp_path: Path) -> AsyncIterator[Database]:
    async for database in _engine("postgres", tmp_path):
        yield database


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[Database]:
    async for database in _engine("sqlite", tmp_path):
        yield database


def _rows(tenant: str, *, runner_id: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    task_id, chain_id, now = uuid4(), uuid4(), datetime.now(UTC)
    task = {
        "id": task_id,
        "tenant_id": tenant,
        "user_id": "ada",
        "status": TaskState.SUBMITTED,
        "chain_id": chain_id,
        # Quotes in the input: the document carries them escaped.
        "request": {"input": 'say "hi"', "tools": ["calculator"], "budget": {"max_steps": 4}},
        "model": "demo",
        "budget": {"max_steps": 4},
        "last_seq": 0,
        "runner_id": runner_id,
        "owner_epoch": 0 if runner_id is None else 1,
        "agent_name": "default",
        "agent_version": 1,
        "conversation_id": None,
        "file_ids": [str(uuid4())],
        "roles": ["member", "viewer"],
        "api_key_id": uuid4(),
        "schedule_id": None,
        "created_at": now,
    }
    chain = {
        "id": chain_id,
        "task_id": task_id,
        "tenant_id": tenant,
        "agent_id": "default@1",
        "status": ChainStatus.INITIALIZING,
        "metrics": RawJSON(ChainMetrics().model_dump_json()),
        "started_at": now,
    }
    return task, chain


async def test_a_task_is_stored_as_given_and_the_rest_keeps_its_defaults(
    database: Database,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    task, chain = _rows(tenant, runner_id="runner-1")
    await RunStores.of(database).queue.create(task, chain)
    async with database.read() as connection:
        stored = await TaskRepository(connection, tenant).get(task["id"])
        chain_row = (
            await connection.execute(
                select(reasoning_chains).where(reasoning_chains.c.id == chain["id"])
            )
        ).one()
    assert stored is not None
    given = stored.model_dump(mode="json")
    for name in ("user_id", "status", "model", "request", "last_seq", "runner_id", "owner_epoch"):
        assert given[name] == (task[name] if name != "status" else task[name].value), name
    assert stored.budget is not None
    assert stored.budget.max_steps == 4
    assert stored.created_at == task["created_at"]
    assert stored.file_ids == task["file_ids"]
    assert stored.roles == ["member", "viewer"]
    assert stored.api_key_id == task["api_key_id"]
    assert stored.agent_version == 1
    assert stored.conversation_id is None
    assert stored.schedule_id is None
    assert (stored.resumes, stored.failures, stored.depth) == (0, 0, 0)
    assert stored.usage == ChainMetrics()
    assert chain_row.task_id == task["id"]
    assert chain_row.agent_id == "default@1"
    assert chain_row.status == ChainStatus.INITIALIZING
    assert chain_row.started_at == chain["started_at"]


async def test_on_postgres_a_plain_task_costs_one_statement_and_a_limited_one_its_transaction(
    postgres: Database,
) -> None:
    database = postgres
    statements: list[str] = []

    def counted(*args: Any) -> None:
        statements.append(args[2])

    event.listen(database.engine.sync_engine, "before_cursor_execute", counted)
    tenant = f"t-{uuid4().hex[:12]}"
    queue = RunStores.of(database).queue
    await queue.create(*_rows(tenant, runner_id="runner-1"))
    assert len(statements) == 1, statements
    assert statements[0].startswith("WITH payload AS")
    statements.clear()
    await queue.create(*_rows(tenant, runner_id="runner-1"), max_unfinished=5)
    # The count of unfinished tasks and the inserts hold one lock, in one transaction.
    assert any("pg_advisory_xact_lock" in statement for statement in statements)
    assert any(statement.startswith("INSERT INTO tasks") for statement in statements)


async def test_on_postgres_a_queued_task_is_announced_and_a_claimed_one_is_not(
    postgres: Database,
) -> None:
    url = postgres.url.set(drivername="postgresql")
    listener = await asyncpg.connect(url.render_as_string(hide_password=False))
    heard: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(QUEUE, lambda *args: heard.put_nowait(args[3]))
    try:
        tenant = f"t-{uuid4().hex[:12]}"
        queue = RunStores.of(postgres).queue
        await queue.create(*_rows(tenant, runner_id="runner-1"))
        async with postgres.autocommit() as connection:
            await connection.exec_driver_sql(f"NOTIFY {QUEUE}, 'marker'")
        queued, chain = _rows(tenant, runner_id=None)
        await queue.create(queued, chain)
        # Notices come in commit order: had the claimed task announced itself, its notice
        # would come before the marker.
        async with asyncio.timeout(10):
            assert [await heard.get(), await heard.get()] == ["marker", ""]
        async with postgres.read() as connection:
            stored = await TaskRepository(connection, tenant).get(queued["id"])
        assert stored is not None
        assert stored.runner_id is None
    finally:
        await listener.close()


async def test_on_sqlite_a_plain_task_costs_one_hand_off_and_a_queued_one_is_announced(
    sqlite: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = RunStores.of(sqlite)
    announced: list[str] = []
    stores.queue.notices.listen(QUEUE, announced.append)
    tenant = f"t-{uuid4().hex[:12]}"
    # Warm: the first opens the connection (a hand-off for each pragma).
    await stores.queue.create(*_rows(tenant, runner_id="runner-1"))
    hand_offs = HandOffs(monkeypatch)
    claimed, _ = rows = _rows(tenant, runner_id="runner-1")
    await stores.queue.create(*rows)
    assert hand_offs.count == 1
    assert announced == []
    queued, _ = rows = _rows(tenant, runner_id=None)
    await stores.queue.create(*rows)
    assert hand_offs.count == 2
    assert announced == [""]
    hand_offs.count = 0
    await stores.queue.create(*_rows(tenant, runner_id="runner-1"), max_unfinished=5)
    # The count and the inserts: one transaction of several statements.
    assert hand_offs.count > 1
    stored = await stores.queue.task(claimed["id"])
    assert stored is not None
    assert stored.runner_id == "runner-1"
    stored = await stores.queue.task(queued["id"])
    assert stored is not None
    assert stored.runner_id is None
