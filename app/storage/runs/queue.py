"""The queue of tasks and the claims on them: a task is stored in the queue (or claimed by the
instance that stores it), claimed by one runner at a time — each claim taking the task's next
ownership epoch, the fence of every write of its run — and given back for another claim."""

from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, and_, exists, func, insert, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import TaskState
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.storage.approvals import PENDING
from app.storage.idempotency import KeyClaim, claim_key
from app.storage.notify import CANCEL, QUEUE
from app.storage.records import TaskRecord
from app.storage.runs.announce import RunStore
from app.storage.runs.group_write import creation, creation_document
from app.storage.runs.rows import RUNNING, UNFINISHED, Fence
from app.storage.tables import CLAIMABLE, approvals, conversations, reasoning_chains, runners, tasks


class ConversationBusy(OmniForgeError):
    """A conversation runs one turn at a time."""

    def __init__(self, conversation_id: UUID, running: UUID | None, reason: str) -> None:
        super().__init__(f"conversation {conversation_id} is busy: {reason}")
        self.conversation_id = conversation_id
        self.running = running
        self.reason = reason


class TooManyUnfinished(OmniForgeError):
    """A tenant's concurrent-run limit refused a new task."""

    def __init__(self, unfinished: int, limit: int) -> None:
        super().__init__(f"{unfinished} unfinished tasks; the limit is {limit}")
        self.unfinished = unfinished
        self.limit = limit


class TaskLost(OmniForgeError):
    """A run's task is no longer held by it (its fence): what it would change is not its to
    change any more."""

    def __init__(self, task_id: UUID) -> None:
        super().__init__(f"task {task_id} is no longer held by this run")
        self.task_id = task_id


def queued() -> Any:
    """In the queue (see `CLAIMABLE`)."""
    return text(CLAIMABLE.replace("runner_id", "tasks.runner_id").replace("status", "tasks.status"))


def claimable() -> Any:
    """In the queue, and not held back after a failed attempt."""
    t = tasks.c
    return and_(queued(), or_(t.claimable_at.is_(None), t.claimable_at <= utc_now()))


def with_usage() -> Any:
    """Tasks with their chains' metrics, as `TaskRecord` reads them."""
    return select(tasks, reasoning_chains.c.metrics.label("usage")).join(
        reasoning_chains, reasoning_chains.c.id == tasks.c.chain_id
    )


def _insert_new(task: Mapping[str, Any], chain: Mapping[str, Any], connection: Connection) -> None:
    """A new task and its chain, on the embedded database's thread (`Database.transact_here`)."""
    connection.execute(insert(tasks), [task])
    connection.execute(insert(reasoning_chains), [chain])


def _held(task_id: UUID, fence: Fence) -> Any:
    t = tasks.c
    return and_(t.id == task_id, t.runner_id == fence.runner_id, t.owner_epoch == fence.epoch)


def _live_runner(runner_id: str) -> Any:
    """The runner's lease holds: a runner whose lease was given up claims nothing more."""
    r = runners.c
    return exists().where(r.id == runner_id, r.released_at.is_(None))


class TaskQueue(RunStore):
    """Stores tasks, claims them for runners and gives them back. What changes for other
    instances is announced (`QUEUE`, `CANCEL`)."""

    async def create(
        self,
        task: dict[str, Any],
        chain: dict[str, Any],
        *,
        max_unfinished: int | None = None,
        after_turns: int | None = None,
        idempotency: KeyClaim | None = None,
        parent: tuple[UUID, Fence] | None = None,
    ) -> None:
        """Stores a new task and its chain (claimed as it is stored when it names its
        `runner_id`, at epoch 1). With `max_unfinished`, refuses it (`TooManyUnfinished`)
        when its tenant already has that many unfinished tasks; the count and the insert are
        one atomic step for the tenant (on Postgres under a transaction-scoped advisory lock,
        on SQLite under its single writer).

        A task with a `conversation_id` becomes that conversation's next turn, numbered in
        the same transaction, under the conversation's row lock: refused (`ConversationBusy`)
        while a turn is unfinished, or when the conversation no longer has `after_turns`
        turns (its history was read before another turn was added).

        With `idempotency`, the key is claimed first, so a duplicate submission waits for
        this one and is refused (`KeyTaken`) before anything else is counted or stored. A
        sub-agent's task (`parent`: its parent's task and fence) is stored only while the
        parent's run holds its task (`TaskLost` otherwise). A task with none of these is
        stored in one statement on Postgres (`group_write.creation`), in one hand-off to the
        embedded database's thread on SQLite."""
        plain = parent is None and idempotency is None and max_unfinished is None
        if plain and task.get("conversation_id") is None:
            queued = task.get("runner_id") is None  # else claimed as it is stored
            if self.database.is_sqlite:
                await self.database.transact_here(partial(_insert_new, task, chain))
                if queued:
                    self.notices.deliver(QUEUE, "")
                return
            statement = creation(tuple(task), tuple(chain), queued=queued)
            async with self.database.autocommit() as connection:
                await connection.execute(statement, {"doc": creation_document(task, chain)})
            return
        async with self.announcing() as (connection, notes):
            if parent is not None:
                held = await connection.scalar(select(tasks.c.id).where(_held(*parent)))
                if held is None:
                    raise TaskLost(parent[0])
            if idempotency is not None:
                await claim_key(connection, task["tenant_id"], task["id"], idempotency)
            if max_unfinished is not None:
                await self._count_unfinished(connection, task["tenant_id"], max_unfinished)
            if task.get("conversation_id") is not None:
                task = {**task, "turn": await self._next_turn(connection, task, after_turns)}
            await connection.execute(insert(tasks), [task])
            await connection.execute(insert(reasoning_chains), [chain])
            if task.get("runner_id") is None:  # else claimed as it is stored
                await notes.send(QUEUE)

    async def _count_unfinished(
        self, connection: AsyncConnection, tenant_id: str, max_unfinished: int
    ) -> None:
        if not self.database.is_sqlite:
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"omniforge:unfinished:{tenant_id}"},
            )
        unfinished = await connection.scalar(
            select(func.count())
            .select_from(tasks)
            .where(tasks.c.tenant_id == tenant_id, tasks.c.status.in_(RUNNING))
            # A family counts once: sub-agents' tasks run within their root's.
            .where(tasks.c.parent_task_id.is_(None))
        )
        if (unfinished or 0) >= max_unfinished:
            raise TooManyUnfinished(unfinished or 0, max_unfinished)

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
                tasks.c.status.in_(UNFINISHED),
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

    async def claim(self, me: str, limit: int) -> list[TaskRecord]:
        """Takes up to `limit` tasks from the queue for `me` (while its lease holds), fairly
        between tenants: a task's place is how many tasks of its tenant run or wait before it
        (so every tenant's first waiting task comes before any tenant's second), then its
        age. Postgres: rows other instances are claiming are skipped (`FOR UPDATE SKIP
        LOCKED`), never waited for."""
        if limit <= 0:
            return []
        t = tasks.c
        waiting = claimable()
        ranked = (
            select(
                t.id,
                func.row_number()
                .over(partition_by=t.tenant_id, order_by=(t.created_at, t.id))
                .label("place"),
            )
            .where(waiting)
            .subquery("ranked")
        )
        running = (
            select(t.tenant_id, func.count().label("running"))
            .where(t.runner_id.is_not(None), t.status.in_(UNFINISHED))
            .group_by(t.tenant_id)
            .subquery("running")
        )
        pick = (
            select(t.id)
            .join(ranked, ranked.c.id == t.id)
            .outerjoin(running, running.c.tenant_id == t.tenant_id)
            .where(waiting, _live_runner(me))
            .order_by(ranked.c.place + func.coalesce(running.c.running, 0), t.created_at, t.id)
            .limit(limit)
            .with_for_update(of=tasks, skip_locked=True)
        )
        async with self.database.transaction() as connection:
            ids = list((await connection.scalars(pick)).all())
            if not ids:
                return []
            await connection.execute(
                update(tasks)
                .where(t.id.in_(ids))
                .values(runner_id=me, owner_epoch=t.owner_epoch + 1, claimable_at=None)
            )
            rows = (await connection.execute(with_usage().where(t.id.in_(ids)))).all()
        by_id = {row.id: TaskRecord.model_validate(row._mapping) for row in rows}
        return [by_id[task_id] for task_id in ids if task_id in by_id]

    async def claim_task(self, task_id: UUID, me: str) -> TaskRecord | None:
        """Takes one task from the queue, or one that waits for approvals, for `me` (to end
        it without running it); None when it is neither. Its pending approvals are closed:
        nobody is to decide them any more."""
        t = tasks.c
        waits = and_(t.runner_id.is_(None), t.status == TaskState.INPUT_REQUIRED)
        async with self.database.transaction() as connection:
            result = await connection.execute(
                update(tasks)
                .where(t.id == task_id, or_(queued(), waits), _live_runner(me))
                .values(runner_id=me, owner_epoch=t.owner_epoch + 1)
                .returning(t.id)
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
            row = (await connection.execute(with_usage().where(t.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def claim_child(self, task_id: UUID, me: str) -> TaskRecord | None:
        """Takes a sub-agent's task that waits to be started or resumed (the queue never
        claims one: its parent's run does) for `me`; None when it is not waiting."""
        t = tasks.c
        async with self.database.transaction() as connection:
            result = await connection.execute(
                update(tasks)
                .where(t.id == task_id, t.runner_id.is_(None), _live_runner(me))
                .where(t.status.in_([TaskState.SUBMITTED, TaskState.WORKING]))
                .values(runner_id=me, owner_epoch=t.owner_epoch + 1)
                .returning(t.id)
            )
            if result.first() is None:
                return None
            row = (await connection.execute(with_usage().where(t.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def children(self, task_id: UUID) -> list[TaskRecord]:
        """The sub-agents' tasks a task's calls started, oldest first."""
        t = tasks.c
        statement = with_usage().where(t.parent_task_id == task_id).order_by(t.created_at)
        async with self.database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [TaskRecord.model_validate(row._mapping) for row in rows]

    async def owned(self, me: str) -> dict[UUID, int]:
        """The unfinished tasks `me` holds, as stored, with the epochs of its claims."""
        t = tasks.c
        statement = select(t.id, t.owner_epoch).where(t.runner_id == me, t.status.in_(UNFINISHED))
        async with self.database.read() as connection:
            return {row.id: row.owner_epoch for row in await connection.execute(statement)}

    async def release(self, me: str, held: Mapping[UUID, int], *, resumed: bool = True) -> int:
        """Gives the unfinished tasks `me` holds (by task, the epoch of its claim) back to the
        queue, for another instance (or `me` later) to resume; `resumed` counts it as a
        resume of each."""
        if not held:
            return 0
        t = tasks.c
        values: dict[str, Any] = {"runner_id": None}
        if resumed:
            values["resumes"] = t.resumes + 1
        released = 0
        async with self.announcing() as (connection, notes):
            for task_id in sorted(held):
                result = await connection.execute(
                    update(tasks)
                    .where(_held(task_id, Fence(me, held[task_id])), t.status.in_(UNFINISHED))
                    .values(**values)
                )
                released += result.rowcount
            if released:
                await notes.send(QUEUE)
        return released

    async def release_failed(
        self, me: str, held: Mapping[UUID, int], *, counted: bool = True
    ) -> float | None:
        """Gives back tasks `me` could not start or end, held back from the queue for a while
        (`backoff_s` of their failures; a failure is `counted` unless the store's own trouble
        caused it), so that no instance takes them again at once. Returns the shortest hold
        (None: none was held by `me`)."""
        t = tasks.c
        shortest: float | None = None
        async with self.announcing() as (connection, notes):
            for task_id in sorted(held):
                condition = and_(_held(task_id, Fence(me, held[task_id])), t.status.in_(UNFINISHED))
                failures = await connection.scalar(select(t.failures).where(condition))
                if failures is None:
                    continue
                failures += 1 if counted else 0
                delay = backoff_s(failures)
                await connection.execute(
                    update(tasks)
                    .where(condition)
                    .values(
                        runner_id=None,
                        failures=failures,
                        claimable_at=utc_now() + timedelta(seconds=delay),
                    )
                )
                shortest = delay if shortest is None else min(shortest, delay)
            if shortest is not None:
                await notes.send(QUEUE)
        return shortest

    async def request_cancel(self, task_id: UUID, reason: str) -> TaskRecord | None:
        """Asks whoever holds the task to cancel it (the first reason given is kept); None
        when it is no longer unfinished."""
        t = tasks.c
        async with self.announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(t.id == task_id, t.status.in_(UNFINISHED))
                .values(cancel_reason=func.coalesce(t.cancel_reason, reason))
                .returning(t.id)
            )
            if result.first() is None:
                return None
            await notes.send(CANCEL, str(task_id))
            row = (await connection.execute(with_usage().where(t.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def task(self, task_id: UUID) -> TaskRecord | None:
        """A task by id, for the instance that runs it (callers read through the tenant's
        repository)."""
        async with self.database.read() as connection:
            row = (await connection.execute(with_usage().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)


def backoff_s(failures: int) -> float:
    """How long a task is held back after its `failures`-th failed attempt: 1, 2, 4 ... s,
    at most a minute."""
    return float(min(2 ** max(failures - 1, 0), 60))


def held_by(task: TaskRecord) -> Fence:
    """The fence of a task as claimed (its runner and the epoch of the claim)."""
    if task.runner_id is None:
        raise ValueError(f"task {task.id} is not claimed")
    return Fence(task.runner_id, task.owner_epoch)
