"""Deleting a tenant's finished tasks with every row about them, and audit events past their
time: the one deletion code of the retention purge and of erasures, run in the caller's
transaction (a purge batch, an erasure).

A task's rows are found through the schema itself: every table with a `task_id` column holds
rows of the task (steps, through their chain), so a table added later is erased too. Cost
records are added to the daily sums of `purged_costs` first, and the `model_usage` roll-up is
never touched: reports and bills stay exact. Audit events go only where `audit_deletions`
permits it (see the migration of the append-only triggers).
"""

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from sqlalchemy import Column, Table, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import TaskState
from app.errors import OmniForgeError
from app.storage.purged_costs import keep_costs
from app.storage.tables import (
    audit_deletions,
    audit_events,
    metadata,
    reasoning_chains,
    reasoning_steps,
    tasks,
)

FINISHED = [state.value for state in TaskState if state.is_terminal]


class TaskUnfinished(OmniForgeError):
    """A task that has not ended (queued, running, or waiting for a human) is not erased."""

    def __init__(self, task_id: UUID, status: str) -> None:
        super().__init__(f"task {task_id} is {status}: only a finished task can be erased")
        self.task_id = task_id
        self.status = status


def _task_tables() -> list[tuple[Table, Column[UUID]]]:
    """The tables holding rows of a task by its `task_id` (the tasks' own chains last, as
    their steps go through them), dependents before what they depend on."""
    found = [
        (table, table.c.task_id)
        for table in reversed(metadata.sorted_tables)
        if "task_id" in table.c and table not in (reasoning_chains, audit_deletions)
    ]
    return [*found, (reasoning_chains, reasoning_chains.c.task_id)]


def _links_to_tasks() -> list[Column[UUID]]:
    """Other columns naming a task (a replay's or fork's source): emptied, not followed."""
    return [
        column
        for table in metadata.sorted_tables
        for column in table.c
        if column.name != "task_id"
        and column.nullable
        and any(fk.column is tasks.c.id for fk in column.foreign_keys)
    ]


async def delete_tasks(
    connection: AsyncConnection,
    tenant_id: str,
    task_ids: Sequence[UUID],
    *,
    at: datetime,
    with_audit: bool = False,
) -> Counter[str]:
    """Deletes the tenant's finished tasks `task_ids` with their rows in every table; with
    `with_audit` (an erasure) the audit events about them too. Raises `TaskUnfinished` for
    one that has not ended (nothing is deleted then: the caller's transaction rolls back).
    The rows deleted, per table."""
    deleted: Counter[str] = Counter()
    if not task_ids:
        return deleted
    ids = list(task_ids)
    t = tasks.c
    unfinished = (
        await connection.execute(
            select(t.id, t.status).where(
                t.tenant_id == tenant_id, t.id.in_(ids), t.status.not_in(FINISHED)
            )
        )
    ).first()
    if unfinished is not None:
        raise TaskUnfinished(unfinished.id, unfinished.status)
    await keep_costs(connection, tenant_id, ids, at=at)
    chains = select(reasoning_chains.c.id).where(
        reasoning_chains.c.tenant_id == tenant_id, reasoning_chains.c.task_id.in_(ids)
    )
    result = await connection.execute(
        delete(reasoning_steps).where(reasoning_steps.c.chain_id.in_(chains))
    )
    deleted[reasoning_steps.name] = result.rowcount
    for table, column in _task_tables():
        statement = delete(table).where(column.in_(ids))
        if "tenant_id" in table.c:
            statement = statement.where(table.c.tenant_id == tenant_id)
        deleted[table.name] = (await connection.execute(statement)).rowcount
    for column in _links_to_tasks():
        await connection.execute(
            update(column.table).where(column.in_(ids)).values({column.name: None})
        )
    if with_audit:
        deleted[audit_events.name] = await _delete_audit(
            connection, tenant_id, [{"task_id": str(task_id)} for task_id in ids]
        )
    result = await connection.execute(delete(tasks).where(t.tenant_id == tenant_id, t.id.in_(ids)))
    deleted[tasks.name] = result.rowcount
    return +deleted


async def delete_audit_before(
    connection: AsyncConnection, tenant_id: str, before: datetime, *, limit: int
) -> int:
    """Deletes up to `limit` of the tenant's audit events created before `before`, oldest
    first; how many."""
    a = audit_events.c
    oldest = (
        select(a.id)
        .where(a.tenant_id == tenant_id, a.created_at < before)
        .order_by(a.id)
        .limit(limit)
    )
    ids = list((await connection.execute(oldest)).scalars())
    if not ids:
        return 0
    return await _delete_audit(connection, tenant_id, [{"before": before}], ids=ids)


async def _delete_audit(
    connection: AsyncConnection,
    tenant_id: str,
    permits: list[dict[str, object]],
    *,
    ids: Sequence[int] | None = None,
) -> int:
    """Deletes the tenant's audit events the `permits` name (those among `ids`, if given),
    under those permits, which are gone again when this returns."""
    a = audit_events.c
    rows = [{"tenant_id": tenant_id, **permit} for permit in permits]
    made = await connection.execute(insert(audit_deletions).returning(audit_deletions.c.id), rows)
    permit_ids = list(made.scalars())
    statement = delete(audit_events).where(a.tenant_id == tenant_id)
    if ids is not None:
        statement = statement.where(a.id.in_(ids))
    else:
        task_ids = [str(permit["task_id"]) for permit in permits]
        statement = statement.where(a.details["task_id"].as_string().in_(task_ids))
    count = (await connection.execute(statement)).rowcount
    await connection.execute(delete(audit_deletions).where(audit_deletions.c.id.in_(permit_ids)))
    return count
