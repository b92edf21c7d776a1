"""The audit log stays append-only down to the database, but for the purge's own deletions of
events past their tenant's audit retention and an erasure's of the events about its tasks."""

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError

from app.storage import Database
from app.storage.erasure import delete_audit_before
from app.storage.tables import audit_deletions, audit_events

NOW = datetime.now(UTC)
CUTOFF = NOW - timedelta(days=400)


async def _event(database: Database, tenant: str, at: datetime, task_id: str = "") -> int:
    details = {"task_id": task_id} if task_id else {"name": "x"}
    async with database.transaction() as connection:
        made = await connection.execute(
            insert(audit_events)
            .values(
                tenant_id=tenant,
                actor="someone",
                action="tool.execute",
                resource_type="tool",
                details=details,
                created_at=at,
            )
            .returning(audit_events.c.id)
        )
        return int(made.scalar_one())


async def _under_permit(database: Database, permit: dict[str, Any], statement: Any) -> None:
    """Runs `statement` in a transaction that first makes the deletion permit `permit`."""
    async with database.transaction() as connection:
        await connection.execute(insert(audit_deletions).values(**permit))
        await connection.execute(statement)


async def _ids(database: Database, tenant: str) -> list[int]:
    async with database.read() as connection:
        statement = select(audit_events.c.id).where(audit_events.c.tenant_id == tenant)
        return sorted((await connection.execute(statement)).scalars())


async def test_a_plain_delete_of_an_expired_event_is_refused(database: Database) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    expired = await _event(database, tenant, NOW - timedelta(days=500))
    with pytest.raises(DBAPIError, match="append-only"):
        async with database.transaction() as connection:
            await connection.execute(delete(audit_events).where(audit_events.c.id == expired))
    assert await _ids(database, tenant) == [expired]


async def test_the_purge_deletes_expired_events_and_only_those(database: Database) -> None:
    tenant, other = f"t-{uuid4().hex[:12]}", f"o-{uuid4().hex[:12]}"
    expired = [await _event(database, tenant, NOW - timedelta(days=days)) for days in (700, 500)]
    fresh = await _event(database, tenant, NOW - timedelta(days=399))
    elsewhere = await _event(database, other, NOW - timedelta(days=500))
    async with database.transaction() as connection:
        first = await delete_audit_before(connection, tenant, CUTOFF, limit=1)
    after_first = await _ids(database, tenant)
    async with database.transaction() as connection:
        second = await delete_audit_before(connection, tenant, CUTOFF, limit=1)
        third = await delete_audit_before(connection, tenant, CUTOFF, limit=1)
    assert (first, second, third) == (1, 1, 0)
    assert after_first == [expired[1], fresh]  # the oldest first
    assert await _ids(database, tenant) == [fresh]
    assert await _ids(database, other) == [elsewhere]
    async with database.read() as connection:
        left = await connection.scalar(select(func.count()).select_from(audit_deletions))
    assert left == 0, "a deletion's permit never outlives its transaction"


async def test_under_the_purge_s_permit_a_fresh_event_or_an_update_is_still_refused(
    database: Database,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    expired = await _event(database, tenant, NOW - timedelta(days=500))
    fresh = await _event(database, tenant, NOW)
    refused = [
        delete(audit_events).where(audit_events.c.id == fresh),
        update(audit_events).where(audit_events.c.id == expired).values(actor="mallory"),
    ]
    for statement in refused:
        with pytest.raises(DBAPIError, match="append-only"):
            await _under_permit(database, {"tenant_id": tenant, "before": CUTOFF}, statement)
    # Another tenant's permit does not let this tenant's expired event go either.
    elsewhere = {"tenant_id": f"o-{uuid4().hex[:12]}", "before": NOW}
    with pytest.raises(DBAPIError, match="append-only"):
        await _under_permit(
            database, elsewhere, delete(audit_events).where(audit_events.c.id == expired)
        )
    assert await _ids(database, tenant) == [expired, fresh]


async def test_an_erasure_permit_lets_only_the_events_about_its_task_go(
    database: Database,
) -> None:
    tenant, task, other_task = f"t-{uuid4().hex[:12]}", str(uuid4()), str(uuid4())
    about = await _event(database, tenant, NOW, task_id=task)
    other = await _event(database, tenant, NOW, task_id=other_task)
    unrelated = await _event(database, tenant, NOW)
    async with database.transaction() as connection:
        await connection.execute(insert(audit_deletions).values(tenant_id=tenant, task_id=task))
        await connection.execute(delete(audit_events).where(audit_events.c.id == about))
        await connection.execute(delete(audit_deletions).where(audit_deletions.c.task_id == task))
    for kept in (other, unrelated):
        with pytest.raises(DBAPIError, match="append-only"):
            await _under_permit(
                database,
                {"tenant_id": tenant, "task_id": task},
                delete(audit_events).where(audit_events.c.id == kept),
            )
    assert await _ids(database, tenant) == [other, unrelated]


async def test_truncate_stays_refused(database: Database) -> None:
    if not database.is_sqlite:
        with pytest.raises(DBAPIError, match="append-only"):
            await _under_permit(
                database, {"tenant_id": "t", "before": NOW}, text("TRUNCATE audit_events")
            )
    else:
        # SQLite has no TRUNCATE: its `DELETE FROM` without a WHERE (the truncate
        # optimisation) still runs the delete trigger for every row.
        tenant = f"t-{uuid4().hex[:12]}"
        await _event(database, tenant, NOW)
        with pytest.raises(DBAPIError, match="append-only"):
            async with database.transaction() as connection:
                await connection.execute(text("DELETE FROM audit_events"))
        assert len(await _ids(database, tenant)) == 1
