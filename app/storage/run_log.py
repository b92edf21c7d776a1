"""The write side of runs: a task's rows, then its steps, events and costs as they happen."""

import json
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import (
    Text,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    null,
    or_,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import ChainStatus, ErrorCode, TaskState
from app.chain.models import utc_now
from app.storage.approvals import PENDING, ApprovalRecord
from app.storage.database import Database
from app.storage.group_write import (
    GROUP_WRITE,
    GROUP_WRITE_WITH_DELIVERIES,
    USAGE_SUMS,
    daily_usage,
    group_document,
)
from app.storage.idempotency import KeyClaim, claim_key
from app.storage.notify import APPROVALS, CANCEL, EVENTS, QUEUE, WEBHOOKS, Notices, payloads
from app.storage.records import RELAYED, StoredEvent, StoredRelay, StoredStep, TaskRecord
from app.storage.tables import (
    CLAIMABLE,
    approvals,
    audit_events,
    conversations,
    cost_records,
    model_usage,
    reasoning_chains,
    reasoning_steps,
    runners,
    task_events,
    tasks,
    webhook_deliveries,
)
from app.storage.webhook_outbox import stage_task_end

_UNFINISHED = [state for state in TaskState if not state.is_terminal]
# What counts against a tenant's `concurrent_runs`: a task waiting for a human does not.
_RUNNING = [state for state in _UNFINISHED if state is not TaskState.INPUT_REQUIRED]


async def _add_usage(connection: AsyncConnection, row: dict[str, Any]) -> None:
    """SQLite: adds a day's usage to the roll-up inside the writer's transaction (SQLite has
    one writer). Money is exact text there, so the sum is made here in decimals, never by the
    database in floats."""
    u = model_usage.c
    key = (u.tenant_id == row["tenant_id"]) & (u.day == row["day"]) & (u.model == row["model"])
    current = (await connection.execute(select(model_usage).where(key))).first()
    if current is None:
        await connection.execute(insert(model_usage).values(**row))
        return
    sums = {name: getattr(current, name) + row[name] for name in USAGE_SUMS}
    await connection.execute(
        update(model_usage).where(key).values(**sums, updated_at=row["updated_at"])
    )


class ConversationBusy(Exception):
    """A conversation runs one turn at a time."""

    def __init__(self, conversation_id: UUID, running: UUID | None, reason: str) -> None:
        super().__init__(f"conversation {conversation_id} is busy: {reason}")
        self.conversation_id = conversation_id
        self.running = running
        self.reason = reason


class TooManyUnfinished(Exception):
    """A tenant's concurrent-run limit refused a new task."""

    def __init__(self, unfinished: int, limit: int) -> None:
        super().__init__(f"{unfinished} unfinished tasks; the limit is {limit}")
        self.unfinished = unfinished
        self.limit = limit


@dataclass(frozen=True, slots=True)
class RunnerLease:
    """This process as a runner of tasks."""

    id: str
    hostname: str
    pid: int
    started_at: datetime


def _same_columns(changes: dict[UUID, dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Update parameters grouped so each group sets the same columns (one executemany each),
    in id order."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row_id in sorted(changes):
        values = changes[row_id]
        groups.setdefault(tuple(sorted(values)), []).append({"row_id": row_id, **values})
    return list(groups.values())


def _process_alive(pid: int, my_pid: int) -> bool:
    """Whether a process of this host still exists. Our own pid counts as alive: it may be
    another runner of this very process, or (a container restarted under the same hostname)
    a predecessor, which its lapsing lease then gives away."""
    if pid == my_pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(slots=True)
class RunWrite:
    """Everything one batch of a run's events changes, written in one transaction."""

    task_id: UUID
    chain_id: UUID
    last_seq: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    task_changes: dict[str, Any] = field(default_factory=dict)
    chain_changes: dict[str, Any] = field(default_factory=dict)
    # Webhook deliveries (the outbox) of the changes this batch makes.
    deliveries: list[dict[str, Any]] = field(default_factory=list)


def _claimable() -> Any:
    return text(CLAIMABLE.replace("runner_id", "tasks.runner_id").replace("status", "tasks.status"))


def _with_usage() -> Any:
    """Tasks with their chains' metrics, as `TaskRecord` reads them."""
    return select(tasks, reasoning_chains.c.metrics.label("usage")).join(
        reasoning_chains, reasoning_chains.c.id == tasks.c.chain_id
    )


def _progress(write: "RunWrite") -> str:
    return f"{write.task_id}:{write.last_seq}"


class _Notes:
    """The notices of one transaction (see `RunLog._announcing`)."""

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


class RunLog:
    """Writes runs and keeps the queue of tasks. A run writes only its own task's rows, so
    statements are keyed by task and chain ids; reads for callers go through the
    tenant-scoped repositories. What changes for other instances is announced by `notices`
    (ids only)."""

    def __init__(self, database: Database, notices: Notices | None = None) -> None:
        self._database = database
        self.notices = notices or Notices()

    @property
    def database(self) -> Database:
        return self._database

    @asynccontextmanager
    async def _announcing(self) -> AsyncIterator[tuple[AsyncConnection, "_Notes"]]:
        """A transaction and the notices it announces (`notes.send`): on Postgres a NOTIFY
        within it, delivered to every instance at COMMIT; on the embedded database delivered
        to this process's listeners after the COMMIT. A transaction that fails announces
        nothing."""
        async with self._database.transaction() as connection:
            notes = _Notes(connection, local=self._database.is_sqlite)
            yield connection, notes
        for channel, payload in notes.after_commit:
            self.notices.deliver(channel, payload)

    async def create(
        self,
        task: dict[str, Any],
        chain: dict[str, Any],
        *,
        max_unfinished: int | None = None,
        after_turns: int | None = None,
        idempotency: KeyClaim | None = None,
    ) -> None:
        """Stores a new task and its chain. With `max_unfinished`, refuses it
        (`TooManyUnfinished`) when its tenant already has that many unfinished tasks; the
        count and the insert are one atomic step for the tenant (on Postgres under a
        transaction-scoped advisory lock, on SQLite under its single writer).

        A task with a `conversation_id` becomes that conversation's next turn, numbered in
        the same transaction, under the conversation's row lock: refused (`ConversationBusy`)
        while a turn is unfinished, or when the conversation no longer has `after_turns`
        turns (its history was read before another turn was added).

        With `idempotency`, the key is claimed first, so a duplicate submission waits for
        this one and is refused (`KeyTaken`) before anything else is counted or stored."""
        async with self._announcing() as (connection, notes):
            if idempotency is not None:
                await claim_key(connection, task["tenant_id"], task["id"], idempotency)
            if max_unfinished is not None:
                tenant_id = task["tenant_id"]
                if not self._database.is_sqlite:
                    await connection.execute(
                        text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                        {"key": f"omniforge:unfinished:{tenant_id}"},
                    )
                unfinished = await connection.scalar(
                    select(func.count())
                    .select_from(tasks)
                    .where(tasks.c.tenant_id == tenant_id, tasks.c.status.in_(_RUNNING))
                    # A family counts once: sub-agents' tasks run within their root's.
                    .where(tasks.c.parent_task_id.is_(None))
                )
                if (unfinished or 0) >= max_unfinished:
                    raise TooManyUnfinished(unfinished or 0, max_unfinished)
            if task.get("conversation_id") is not None:
                task = {**task, "turn": await self._next_turn(connection, task, after_turns)}
            await connection.execute(insert(tasks), [task])
            await connection.execute(insert(reasoning_chains), [chain])
            queued = task.get("runner_id") is None  # else claimed as it is stored
            if queued:
                await notes.send(QUEUE)

    async def _next_turn(
        self, connection: AsyncConnection, task: dict[str, Any], after_turns: int | None
    ) -> int:
        conversation_id, tenant_id = task["conversation_id"], task["tenant_id"]
        c = conversations.c
        turns = await connection.scalar(
            select(c.turns)
            .where(c.id == conversation_id, c.tenant_id == tenant_id)
            .with_for_update()
        )
        if turns is None:
            raise ConversationBusy(conversation_id, None, "the conversation no longer exists")
        running = await connection.scalar(
            select(tasks.c.id)
            .where(
                tasks.c.conversation_id == conversation_id,
                tasks.c.tenant_id == tenant_id,
                tasks.c.status.in_(_UNFINISHED),
            )
            .limit(1)
        )
        if running is not None:
            raise ConversationBusy(conversation_id, running, f"turn task {running} is running")
        if after_turns is not None and turns != after_turns:
            raise ConversationBusy(
                conversation_id, None, "another turn was added while this one was prepared"
            )
        await connection.execute(
            update(conversations)
            .where(c.id == conversation_id, c.tenant_id == tenant_id)
            .values(turns=turns + 1, file_ids=task.get("file_ids"), updated_at=task["created_at"])
        )
        return int(turns) + 1

    async def append(
        self, writes: Sequence[RunWrite], audits: Sequence[dict[str, Any]] = ()
    ) -> None:
        """Stores the writes of any number of runs in one transaction (group commit), in
        order: a later write of the same run overrides an earlier one's changes; `audits` are
        further `audit_events` rows (each with its `tenant_id`) stored with them. Rows are
        locked tasks first, then chains, in id order, as `end_unattended` does, so concurrent
        writers cannot deadlock."""
        task_changes: dict[UUID, dict[str, Any]] = {}
        chain_changes: dict[UUID, dict[str, Any]] = {}
        for write in writes:
            task_changes.setdefault(write.task_id, {}).update(
                write.task_changes, last_seq=write.last_seq
            )
            if write.chain_changes:
                chain_changes.setdefault(write.chain_id, {}).update(write.chain_changes)
        steps = [row for write in writes for row in write.steps]
        events = [row for write in writes for row in write.events]
        costs = [row for write in writes for row in write.costs]
        audits = [*audits, *(row for write in writes for row in write.audits)]
        usage = daily_usage(costs, utc_now()) if costs else []
        progress = {write.task_id: _progress(write) for write in writes}
        notes = payloads(progress.values())
        deliveries = [row for write in writes for row in write.deliveries]
        if not self._database.is_sqlite:
            document = group_document(
                task_changes, chain_changes, steps, events, costs, audits, usage, deliveries
            )
            # Runs nobody hears of use the statement without the outbox's parts.
            group_write = GROUP_WRITE_WITH_DELIVERIES if deliveries else GROUP_WRITE
            async with self._database.autocommit() as connection:
                await connection.execute(group_write, {"doc": document, "notes": notes})
            return
        async with self._announcing() as (connection, announced):
            for table, changes in ((tasks, task_changes), (reasoning_chains, chain_changes)):
                statement = update(table).where(table.c.id == bindparam("row_id"))
                for rows in _same_columns(changes):
                    await connection.execute(statement, rows)
            for table, rows in (
                (reasoning_steps, steps),
                (task_events, events),
                (cost_records, costs),
                (audit_events, audits),
            ):
                if rows:
                    await connection.execute(insert(table), rows)
            for row in usage:
                await _add_usage(connection, row)
            for note in notes:
                await announced.send(EVENTS, note)
            if deliveries:
                await connection.execute(insert(webhook_deliveries), deliveries)
                await announced.send(WEBHOOKS)

    async def recent_calls(self, tenant_id: str, since: datetime) -> list[Any]:
        """The tenant's model calls recorded since `since`: time, model, tokens, cost."""
        c = cost_records.c
        statement = select(
            c.recorded_at, c.model, c.input_tokens, c.output_tokens, c.cost_usd
        ).where(c.tenant_id == tenant_id, c.recorded_at >= since, c.model.is_not(None))
        async with self._database.read() as connection:
            return list((await connection.execute(statement)).all())

    async def register_runner(self, runner: RunnerLease) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(
                insert(runners).values(
                    id=runner.id,
                    hostname=runner.hostname,
                    pid=runner.pid,
                    started_at=runner.started_at,
                    heartbeat_at=runner.started_at,
                )
            )

    async def renew_lease(self, runner_id: str, at: datetime) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(
                update(runners).where(runners.c.id == runner_id).values(heartbeat_at=at)
            )

    async def remove_runner(self, runner_id: str) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(delete(runners).where(runners.c.id == runner_id))

    async def release_orphans(self, me: RunnerLease, *, lease_s: float, now: datetime) -> int:
        """Puts back in the queue the unfinished runs whose runner is gone: no such runner, a
        lapsed lease, or a process of this host that no longer exists (then known at once,
        without waiting for the lease: a restarted server takes its predecessor's runs back
        as it starts). Returns how many."""
        dead = [
            row.id
            for row in await self.runners()
            if row.id != me.id
            and (
                row.heartbeat_at < now - timedelta(seconds=lease_s)
                or (row.hostname == me.hostname and not _process_alive(row.pid, me.pid))
            )
        ]
        known = select(runners.c.id).where(runners.c.id.not_in(dead))
        statement = (
            update(tasks)
            .where(tasks.c.status.in_(_UNFINISHED), tasks.c.runner_id.is_not(None))
            .where(tasks.c.runner_id.not_in(known), tasks.c.runner_id != me.id)
            # Counted: a run whose instance keeps dying with it is not resumed for ever.
            .values(runner_id=None, resumes=tasks.c.resumes + 1)
            .returning(tasks.c.id)
        )
        async with self._announcing() as (connection, notes):
            released = len((await connection.execute(statement)).all())
            if dead:
                await connection.execute(delete(runners).where(runners.c.id.in_(dead)))
            if released:
                await notes.send(QUEUE)
        return released

    async def owned(self, me: str) -> list[UUID]:
        """The unfinished tasks `me` owns, as stored."""
        statement = select(tasks.c.id).where(
            tasks.c.runner_id == me, tasks.c.status.in_(_UNFINISHED)
        )
        async with self._database.read() as connection:
            return list((await connection.scalars(statement)).all())

    async def claim(self, me: str, limit: int) -> list[TaskRecord]:
        """Takes up to `limit` tasks from the queue for `me`, fairly between tenants: a task's
        place is how many tasks of its tenant run or wait before it (so every tenant's first
        waiting task comes before any tenant's second), then its age. Postgres: rows other
        instances are claiming are skipped (`FOR UPDATE SKIP LOCKED`), never waited for."""
        if limit <= 0:
            return []
        claimable = _claimable()
        ranked = (
            select(
                tasks.c.id,
                func.row_number()
                .over(partition_by=tasks.c.tenant_id, order_by=(tasks.c.created_at, tasks.c.id))
                .label("place"),
            )
            .where(claimable)
            .subquery("ranked")
        )
        running = (
            select(tasks.c.tenant_id, func.count().label("running"))
            .where(tasks.c.runner_id.is_not(None), tasks.c.status.in_(_UNFINISHED))
            .group_by(tasks.c.tenant_id)
            .subquery("running")
        )
        pick = (
            select(tasks.c.id)
            .join(ranked, ranked.c.id == tasks.c.id)
            .outerjoin(running, running.c.tenant_id == tasks.c.tenant_id)
            .where(claimable)
            .order_by(
                ranked.c.place + func.coalesce(running.c.running, 0),
                tasks.c.created_at,
                tasks.c.id,
            )
            .limit(limit)
            .with_for_update(of=tasks, skip_locked=True)
        )
        async with self._database.transaction() as connection:
            ids = list((await connection.scalars(pick)).all())
            if not ids:
                return []
            await connection.execute(update(tasks).where(tasks.c.id.in_(ids)).values(runner_id=me))
            rows = (await connection.execute(_with_usage().where(tasks.c.id.in_(ids)))).all()
        by_id = {row.id: TaskRecord.model_validate(row._mapping) for row in rows}
        return [by_id[task_id] for task_id in ids if task_id in by_id]

    async def claim_task(self, task_id: UUID, me: str) -> TaskRecord | None:
        """Takes one task from the queue, or one that waits for approvals, for `me` (to end
        it without running it); None when it is neither. Its pending approvals are closed:
        nobody is to decide them any more."""
        waits = and_(tasks.c.runner_id.is_(None), tasks.c.status == TaskState.INPUT_REQUIRED)
        async with self._database.transaction() as connection:
            result = await connection.execute(
                update(tasks)
                .where(tasks.c.id == task_id, or_(_claimable(), waits))
                .values(runner_id=me)
                .returning(tasks.c.id)
            )
            if result.first() is None:
                return None
            await connection.execute(
                update(approvals)
                .where(approvals.c.task_id == task_id, approvals.c.status == PENDING)
                .values(
                    status="denied", reason="the task ended before a decision", decided_at=utc_now()
                )
            )
            row = (await connection.execute(_with_usage().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def claim_child(self, task_id: UUID, me: str) -> TaskRecord | None:
        """Takes a sub-agent's task that waits to be started or resumed (the queue never
        claims one: its parent's run does) for `me`; None when it is not waiting."""
        async with self._database.transaction() as connection:
            result = await connection.execute(
                update(tasks)
                .where(tasks.c.id == task_id, tasks.c.runner_id.is_(None))
                .where(tasks.c.status.in_([TaskState.SUBMITTED, TaskState.WORKING]))
                .values(runner_id=me)
                .returning(tasks.c.id)
            )
            if result.first() is None:
                return None
            row = (await connection.execute(_with_usage().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def children(self, task_id: UUID) -> list[TaskRecord]:
        """The sub-agents' tasks a task's calls started, oldest first."""
        statement = (
            _with_usage().where(tasks.c.parent_task_id == task_id).order_by(tasks.c.created_at)
        )
        async with self._database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [TaskRecord.model_validate(row._mapping) for row in rows]

    async def release(self, task_ids: Sequence[UUID], me: str, *, resumed: bool = True) -> int:
        """Gives `me`'s unfinished runs back to the queue, for another instance (or `me`
        later) to resume; `resumed` counts it as a resume of each."""
        if not task_ids:
            return 0
        values: dict[str, Any] = {"runner_id": None}
        if resumed:
            values["resumes"] = tasks.c.resumes + 1
        async with self._announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(tasks.c.id.in_(list(task_ids)), tasks.c.runner_id == me)
                .where(tasks.c.status.in_(_UNFINISHED))
                .values(**values)
                .returning(tasks.c.id)
            )
            released = len(result.all())
            if released:
                await notes.send(QUEUE)
        return released

    async def ask(self, rows: Sequence[dict[str, Any]]) -> None:
        """Stores the approvals a run is about to wait for, before anyone is told of them."""
        async with self._announcing() as (connection, notes):
            await connection.execute(insert(approvals), list(rows))
            await notes.send(APPROVALS)

    async def suspend(self, task_id: UUID, me: str) -> bool:
        """A run of `me` that stopped to wait for approvals: its task waits with no owner
        (`input_required`) until its last pending approval is decided, or, when they all
        are already, goes back to the queue at once. True when it waits."""
        async with self._announcing() as (connection, notes):
            owned = await connection.execute(
                select(tasks.c.id)
                .where(tasks.c.id == task_id, tasks.c.runner_id == me)
                .where(tasks.c.status.in_(_UNFINISHED))
                .with_for_update()
            )
            if owned.first() is None:
                return False
            waiting = await self._pending(connection, task_id) > 0
            state = TaskState.INPUT_REQUIRED if waiting else TaskState.WORKING
            await connection.execute(
                update(tasks).where(tasks.c.id == task_id).values(runner_id=None, status=state)
            )
            if not waiting:
                await notes.send(QUEUE)
        return waiting

    @staticmethod
    async def _pending(connection: AsyncConnection, task_id: UUID) -> int:
        statement = (
            select(func.count())
            .select_from(approvals)
            .where(approvals.c.task_id == task_id, approvals.c.status == PENDING)
        )
        return int(await connection.scalar(statement) or 0)

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
        async with self._announcing() as (connection, notes):
            locked = await connection.execute(
                select(tasks.c.status)
                .where(tasks.c.id == task_id, tasks.c.tenant_id == tenant_id)
                .with_for_update()
            )
            task_status = locked.scalar()
            if task_status is None or TaskState(task_status).is_terminal:
                return None
            decided = await connection.execute(
                update(approvals)
                .where(
                    approvals.c.id == approval_id,
                    approvals.c.task_id == task_id,
                    approvals.c.tenant_id == tenant_id,
                    approvals.c.status == PENDING,
                )
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
            resumes = task_status == TaskState.INPUT_REQUIRED and not await self._pending(
                connection, task_id
            )
            if resumes:
                await connection.execute(
                    update(tasks)
                    .where(tasks.c.id == task_id, tasks.c.status == TaskState.INPUT_REQUIRED)
                    .values(status=TaskState.WORKING)
                )
                await notes.send(QUEUE)
        return ApprovalRecord.model_validate(row._mapping)

    async def next_expiry(self) -> datetime | None:
        """When the first pending approval (of an unfinished task) times out."""
        statement = (
            select(func.min(approvals.c.expires_at))
            .join(tasks, tasks.c.id == approvals.c.task_id)
            .where(approvals.c.status == PENDING, tasks.c.status.in_(_UNFINISHED))
        )
        async with self._database.read() as connection:
            at: datetime | None = await connection.scalar(statement)
        return at

    async def due(self, now: datetime, limit: int = 100) -> list[tuple[str, UUID, UUID, int]]:
        """Pending approvals past their time: tenant, task, approval, and their timeout (s)."""
        a = approvals.c
        statement = (
            select(a.tenant_id, a.task_id, a.id, a.created_at, a.expires_at)
            .join(tasks, tasks.c.id == a.task_id)
            .where(a.status == PENDING, a.expires_at <= now, tasks.c.status.in_(_UNFINISHED))
            .order_by(a.expires_at)
            .limit(limit)
        )
        async with self._database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [(row[0], row[1], row[2], round((row[4] - row[3]).total_seconds())) for row in rows]

    async def decisions(self, task_id: UUID) -> list[ApprovalRecord]:
        """A task's decided approvals its next run has yet to act on."""
        statement = select(approvals).where(
            approvals.c.task_id == task_id,
            approvals.c.status != PENDING,
            approvals.c.consumed_at.is_(None),
        )
        async with self._database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [ApprovalRecord.model_validate(row._mapping) for row in rows]

    async def consume(self, approval_ids: Sequence[UUID], at: datetime) -> None:
        """The decisions are being acted on: a later resume treats their calls as any other
        call started before a stop."""
        async with self._database.transaction() as connection:
            await connection.execute(
                update(approvals)
                .where(approvals.c.id.in_(list(approval_ids)), approvals.c.consumed_at.is_(None))
                .values(consumed_at=at)
            )

    async def request_cancel(self, task_id: UUID, reason: str) -> TaskRecord | None:
        """Asks whoever owns the task to cancel it (the first reason given is kept); None when
        it is no longer unfinished."""
        async with self._announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(tasks.c.id == task_id, tasks.c.status.in_(_UNFINISHED))
                .values(cancel_reason=func.coalesce(tasks.c.cancel_reason, reason))
                .returning(tasks.c.id)
            )
            if result.first() is None:
                return None
            await notes.send(CANCEL, str(task_id))
            row = (await connection.execute(_with_usage().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def task(self, task_id: UUID) -> TaskRecord | None:
        """A task by id, for the instance that runs it (callers read through the tenant's
        repository)."""
        async with self._database.read() as connection:
            row = (await connection.execute(_with_usage().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def chain_steps(self, chain_id: UUID) -> list[str]:
        """A chain's stored steps (their JSON), in order: what a resumed run replays."""
        s = reasoning_steps.c
        statement = select(cast(s.data, Text)).where(s.chain_id == chain_id).order_by(s.step_number)
        async with self._database.read() as connection:
            return list((await connection.scalars(statement)).all())

    async def runners(self) -> list[Any]:
        async with self._database.read() as connection:
            return list((await connection.execute(select(runners))).all())

    async def end_owned(
        self,
        task: TaskRecord,
        events: list[dict[str, Any]],
        *,
        status: TaskState,
        error_code: ErrorCode,
        message: str,
        at: datetime,
        me: str,
    ) -> bool:
        """Ends a run `me` owns but does not run (cancelled in the queue, or one that cannot
        be resumed) with its closing events; False when it was no longer unfinished or no
        longer `me`'s: only a run's owner writes its events."""
        async with self._announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(tasks.c.id == task.id, tasks.c.last_seq == task.last_seq)
                .where(tasks.c.status.in_(_UNFINISHED), tasks.c.runner_id == me)
                .values(
                    status=status,
                    error_code=error_code,
                    error_message=message,
                    finished_at=at,
                    last_seq=task.last_seq + len(events),
                )
            )
            if result.rowcount != 1:
                return False
            await connection.execute(
                update(reasoning_chains)
                .where(reasoning_chains.c.id == task.chain_id)
                .values(
                    status=ChainStatus.CANCELLED
                    if status is TaskState.CANCELLED
                    else ChainStatus.FAILED,
                    error_code=error_code,
                    error_message=message,
                    completed_at=at,
                )
            )
            await connection.execute(insert(task_events), events)
            note = f"{task.id}:{task.last_seq + len(events)}"
            await notes.send(EVENTS, note)
            staged = await stage_task_end(
                connection,
                tenant_id=task.tenant_id,
                task_id=task.id,
                chain_id=task.chain_id,
                request=task.request,
                status=status,
                error_code=error_code,
                message=message,
                metrics=task.usage,
                at=at,
            )
            if staged:
                await notes.send(WEBHOOKS)
        return True

    async def replay(
        self, tenant_id: str, task_id: UUID, chain_id: UUID, *, after: int, limit: int
    ) -> list[StoredEvent | StoredStep | StoredRelay]:
        """Stored events of a task's stream with `seq > after`, in order, at most `limit`;
        the caller's tenant scopes the read. Its sub-agents' events relayed into it come with
        the child's event or step they point to."""
        e, s = task_events.c, reasoning_steps.c
        # One statement, so one snapshot: two reads could see a later write between them,
        # and a step stored after events not yet seen would open a gap.
        steps = select(
            s.seq,
            null().label("event_type"),
            cast(s.data, Text).label("data"),
            s.timestamp,
            cast(s.metrics, Text).label("metrics"),
            s.type,
            s.tool_type,
            s.tool_name,
            s.visibility,
        ).where(s.tenant_id == tenant_id, s.chain_id == chain_id, s.seq > after)
        events = select(
            e.seq, e.type, cast(e.data, Text), null(), null(), null(), null(), null(), null()
        ).where(e.tenant_id == tenant_id, e.task_id == task_id, e.seq > after)
        both = union_all(steps, events).subquery()
        query = select(both).order_by(both.c.seq).limit(limit)
        async with self._database.read() as connection:
            rows = (await connection.execute(query)).all()
            page: list[StoredEvent | StoredStep | StoredRelay] = [
                StoredEvent(seq=row[0], type=row[1], data=row[2])
                if row[1] is not None
                else _stored_step(row[0], row[2:])
                for row in rows
            ]
            relays = [item for item in page if _is_relay(item)]
            if not relays:
                return page
            # A relay is stored after (or with) the event it points to: a second read sees it.
            resolved = await _relayed(connection, tenant_id, relays)
        # One whose event is gone (its child erased) stays a bare `RELAYED` event, counted in
        # the page's length so that a full page still says more may follow.
        return [resolved.get(item.seq, item) if _is_relay(item) else item for item in page]


def _stored_step(seq: int, columns: Sequence[Any]) -> StoredStep:
    """A stored step from its row's data, timestamp, metrics and fact columns."""
    data, timestamp, metrics, step_type, tool_type, tool_name, visibility = columns
    return StoredStep(
        seq=seq,
        timestamp=timestamp,
        step=data,
        metrics=metrics,
        type=step_type,
        tool_type=tool_type,
        tool_name=tool_name,
        visibility=visibility,
    )


def _is_relay(item: StoredEvent | StoredStep | StoredRelay) -> bool:
    return isinstance(item, StoredEvent) and item.type == RELAYED


async def _relayed(
    connection: AsyncConnection,
    tenant_id: str,
    relays: Sequence[StoredEvent | StoredStep | StoredRelay],
) -> dict[int, StoredRelay]:
    """The children's events and steps that `relays` point to, by the relay's seq."""
    pointers = {
        relay.seq: json.loads(relay.data) for relay in relays if isinstance(relay, StoredEvent)
    }
    steps_at = {(UUID(p["chain_id"]), p["seq"]) for p in pointers.values()}
    events_at = {(UUID(p["task_id"]), p["seq"]) for p in pointers.values()}
    e, s = task_events.c, reasoning_steps.c
    step_rows = await connection.execute(
        select(
            s.chain_id,
            s.seq,
            cast(s.data, Text),
            s.timestamp,
            cast(s.metrics, Text),
            s.type,
            s.tool_type,
            s.tool_name,
            s.visibility,
        ).where(s.tenant_id == tenant_id, tuple_(s.chain_id, s.seq).in_(steps_at))
    )
    found: dict[tuple[UUID, int], StoredEvent | StoredStep] = {
        (row[0], row[1]): _stored_step(row[1], row[2:]) for row in step_rows
    }
    event_rows = await connection.execute(
        select(e.task_id, e.seq, e.type, cast(e.data, Text)).where(
            e.tenant_id == tenant_id, tuple_(e.task_id, e.seq).in_(events_at)
        )
    )
    events = {
        (row[0], row[1]): StoredEvent(seq=row[1], type=row[2], data=row[3]) for row in event_rows
    }
    resolved: dict[int, StoredRelay] = {}
    for seq, pointer in pointers.items():
        task_id, chain_id = UUID(pointer["task_id"]), UUID(pointer["chain_id"])
        event = found.get((chain_id, pointer["seq"])) or events.get((task_id, pointer["seq"]))
        if event is None:
            continue
        parent_step = pointer.get("parent_step_id")
        resolved[seq] = StoredRelay(
            seq=seq,
            task_id=task_id,
            chain_id=chain_id,
            depth=pointer["depth"],
            parent_step_id=None if parent_step is None else UUID(parent_step),
            calls=[tuple(call) for call in pointer.get("calls", ())],
            event=event,
        )
    return resolved
