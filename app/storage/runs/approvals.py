"""The writes of tool calls that wait for a human: a run asking (while it holds its task), the
run suspending its task until they are decided, the decisions, their timeouts, and a resumed
run taking the decisions up. Reads for callers go through `app.storage.approvals`."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import TaskState
from app.storage.approvals import PENDING, ApprovalRecord
from app.storage.notify import APPROVALS, QUEUE
from app.storage.runs.announce import RunStore
from app.storage.runs.queue import TaskLost
from app.storage.runs.rows import UNFINISHED, Fence
from app.storage.tables import approvals, audit_events, tasks


async def _pending(connection: AsyncConnection, task_id: UUID) -> int:
    statement = (
        select(func.count())
        .select_from(approvals)
        .where(approvals.c.task_id == task_id, approvals.c.status == PENDING)
    )
    return int(await connection.scalar(statement) or 0)


class ApprovalWrites(RunStore):
    """Approvals as runs, reviewers and timeouts change them."""

    async def ask(self, task_id: UUID, fence: Fence, rows: Sequence[dict[str, Any]]) -> None:
        """Stores the approvals a run is about to wait for, before anyone is told of them, as
        long as the run holds its task (`TaskLost` otherwise)."""
        t = tasks.c
        async with self.announcing() as (connection, notes):
            held = await connection.scalar(
                select(t.id).where(
                    t.id == task_id, t.runner_id == fence.runner_id, t.owner_epoch == fence.epoch
                )
            )
            if held is None:
                raise TaskLost(task_id)
            await connection.execute(insert(approvals), list(rows))
            await notes.send(APPROVALS)

    async def suspend(self, task_id: UUID, fence: Fence) -> bool:
        """A run that stopped to wait for approvals: its task waits with no owner
        (`input_required`) until its last pending approval is decided, or, when they all
        are already, goes back to the queue at once. True when it waits; False too when the
        run no longer held its task."""
        t = tasks.c
        async with self.announcing() as (connection, notes):
            owned = await connection.execute(
                select(t.id)
                .where(t.id == task_id, t.runner_id == fence.runner_id)
                .where(t.owner_epoch == fence.epoch, t.status.in_(UNFINISHED))
                .with_for_update()
            )
            if owned.first() is None:
                return False
            waiting = await _pending(connection, task_id) > 0
            state = TaskState.INPUT_REQUIRED if waiting else TaskState.WORKING
            await connection.execute(
                update(tasks).where(t.id == task_id).values(runner_id=None, status=state)
            )
            if not waiting:
                await notes.send(QUEUE)
        return waiting

    async def decide(
        self,
        tenant_id: str,
        task_id: UUID,
        approval_id: UUID,
        *,
        status: str,
        by: str | None,
        reason: str | None,
        arguments: dict[str, Any] | None,
        at: datetime,
        audit: dict[str, Any],
    ) -> ApprovalRecord | None:
        """Decides a pending approval of the tenant's task, with its audit row; the last one
        of a waiting task puts it back in the queue. None when it was not pending (any
        more), or its task is finished."""
        t, a = tasks.c, approvals.c
        async with self.announcing() as (connection, notes):
            locked = await connection.execute(
                select(t.status).where(t.id == task_id, t.tenant_id == tenant_id).with_for_update()
            )
            task_status = locked.scalar()
            if task_status is None or TaskState(task_status).is_terminal:
                return None
            decided = await connection.execute(
                update(approvals)
                .where(a.id == approval_id, a.task_id == task_id, a.tenant_id == tenant_id)
                .where(a.status == PENDING)
                .values(
                    status=status,
                    decided_by=by,
                    reason=reason,
                    decided_arguments=arguments,
                    decided_at=at,
                )
                .returning(*approvals.c)
            )
            row = decided.first()
            if row is None:
                return None
            await connection.execute(insert(audit_events), [audit])
            resumes = task_status == TaskState.INPUT_REQUIRED and not await _pending(
                connection, task_id
            )
            if resumes:
                await connection.execute(
                    update(tasks)
                    .where(t.id == task_id, t.status == TaskState.INPUT_REQUIRED)
                    .values(status=TaskState.WORKING)
                )
                await notes.send(QUEUE)
        return ApprovalRecord.model_validate(row._mapping)

    async def next_expiry(self) -> datetime | None:
        """When the first pending approval (of an unfinished task) times out."""
        statement = (
            select(func.min(approvals.c.expires_at))
            .join(tasks, tasks.c.id == approvals.c.task_id)
            .where(approvals.c.status == PENDING, tasks.c.status.in_(UNFINISHED))
        )
        async with self.database.read() as connection:
            at: datetime | None = await connection.scalar(statement)
        return at

    async def due(self, now: datetime, limit: int = 100) -> list[tuple[str, UUID, UUID, int]]:
        """Pending approvals past their time: tenant, task, approval, and their timeout (s)."""
        a = approvals.c
        statement = (
            select(a.tenant_id, a.task_id, a.id, a.created_at, a.expires_at)
            .join(tasks, tasks.c.id == a.task_id)
            .where(a.status == PENDING, a.expires_at <= now, tasks.c.status.in_(UNFINISHED))
            .order_by(a.expires_at)
            .limit(limit)
        )
        async with self.database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [(row[0], row[1], row[2], round((row[4] - row[3]).total_seconds())) for row in rows]

    async def decisions(self, task_id: UUID) -> list[ApprovalRecord]:
        """A task's decided approvals its next run has yet to act on."""
        a = approvals.c
        statement = select(approvals).where(
            a.task_id == task_id, a.status != PENDING, a.consumed_at.is_(None)
        )
        async with self.database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [ApprovalRecord.model_validate(row._mapping) for row in rows]

    async def consume(self, approval_ids: Sequence[UUID], at: datetime) -> None:
        """The decisions are being acted on: a later resume treats their calls as any other
        call started before a stop."""
        a = approvals.c
        async with self.database.transaction() as connection:
            await connection.execute(
                update(approvals)
                .where(a.id.in_(list(approval_ids)), a.consumed_at.is_(None))
                .values(consumed_at=at)
            )
