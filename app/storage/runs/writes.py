"""The write side of runs: each batch of a run's events with what it changes, and the end of a
task that ends without its run — every write conditional on the run's hold on its task."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import partial
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Table, bindparam, func, insert, select, update

from app.chain import ChainStatus, ErrorCode, TaskState
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.storage.notify import EVENTS, WEBHOOKS
from app.storage.records import TaskRecord
from app.storage.runs.announce import RunStore
from app.storage.runs.group_write import (
    GROUP_WRITE,
    GROUP_WRITE_WITH_DELIVERIES,
    USAGE_SUMS,
    group_document,
)
from app.storage.runs.rows import (
    RUN_CHAIN_COLUMNS,
    RUN_TASK_COLUMNS,
    UNFINISHED,
    CostRow,
    EventRow,
    Fence,
    RunWrite,
)
from app.storage.tables import (
    audit_events,
    cost_records,
    model_usage,
    reasoning_chains,
    reasoning_steps,
    task_events,
    tasks,
    webhook_deliveries,
)
from app.storage.types import RawJSON
from app.storage.webhook_outbox import stage_task_end


class _Refused(OmniForgeError):
    """A task's update of a batch changed no row: the batch is written again task by task."""


class RunWrites(RunStore):
    """Stores runs' writes. A run writes only its own task's rows, so statements are keyed
    by task and chain ids (callers read through the tenant-scoped repositories)."""

    async def append(
        self, writes: Sequence[RunWrite], audits: Sequence[Mapping[str, Any]] = ()
    ) -> set[UUID]:
        """Stores the writes of any number of runs in one transaction (group commit), in
        order (a later write of a run overrides an earlier one's changes), each only where
        its run still holds its task (`RunWrite.fence`) and the task's stored events end
        where the write begins; `audits` (each with its `tenant_id`) are audit rows of
        requests, stored with them. Returns the tasks whose writes were refused: their runs
        no longer hold them. A write found stored already (tried again after a commit whose
        answer was lost) counts as stored, never twice."""
        entries: dict[UUID, dict[str, Any]] = {}
        chains: dict[UUID, dict[str, Any]] = {}
        for write in writes:
            entry = entries.get(write.task_id)
            if entry is None:
                fence = write.fence
                entry = entries[write.task_id] = {
                    "row_id": write.task_id,
                    "runner_id": fence.runner_id,
                    "epoch": fence.epoch,
                    "after_seq": write.after_seq,
                }
            entry.update(write.task_changes)
            entry["last_seq"] = write.last_seq
            if write.chain_changes:
                chain = chains.setdefault(
                    write.chain_id, {"row_id": write.chain_id, "task_id": write.task_id}
                )
                chain.update(write.chain_changes)
        if self.database.is_sqlite:
            refused = await self._append_here(entries, chains, writes, audits)
        else:
            refused = await self._append_group(entries, chains, writes, audits)
        if refused:
            refused -= await self._stored_already({task: entries[task] for task in refused})
        return refused

    async def _append_group(
        self,
        entries: dict[UUID, dict[str, Any]],
        chains: dict[UUID, dict[str, Any]],
        writes: Sequence[RunWrite],
        audits: Sequence[Mapping[str, Any]],
    ) -> set[UUID]:
        """Postgres: the whole group in one statement (see `group_write`)."""
        document = group_document(
            [entries[key] for key in sorted(entries)],
            [chains[key] for key in sorted(chains)],
            writes,
            audits,
        )
        # Runs nobody hears of use the statement without the outbox's parts.
        deliveries = any(write.deliveries for write in writes)
        statement = GROUP_WRITE_WITH_DELIVERIES if deliveries else GROUP_WRITE
        async with self.database.autocommit() as connection:
            result = await connection.execute(statement, {"doc": document, "now": utc_now()})
            stored = set(result.scalar_one() or ())
        return {task for task in entries if task not in stored}

    async def _append_here(
        self,
        entries: dict[UUID, dict[str, Any]],
        chains: dict[UUID, dict[str, Any]],
        writes: Sequence[RunWrite],
        audits: Sequence[Mapping[str, Any]],
    ) -> set[UUID]:
        """The embedded database: the same, a statement per table in one transaction, in one
        hand-off to the database's thread (it has one writer, so the sums of the roll-up are
        made here, in decimals). The tasks' updates go as one batch; should one be refused
        (its run no longer holds its task), the transaction is rolled back and the group
        written task by task, to learn which."""
        group = _HereGroup(entries, chains, writes, audits)
        try:
            stored = await self.database.transact_here(partial(group.write, batched=True))
        except _Refused:
            stored = await self.database.transact_here(partial(group.write, batched=False))
        for task_id in sorted(stored):
            self.notices.deliver(EVENTS, f"{task_id}:{entries[task_id]['last_seq']}")
        if any(write.deliveries for write in writes if write.task_id in stored):
            self.notices.deliver(WEBHOOKS, "")
        return {task for task in entries if task not in stored}

    async def _stored_already(self, entries: Mapping[UUID, Mapping[str, Any]]) -> set[UUID]:
        """Of refused writes, those whose task is held as they say and ends where they end:
        stored by an earlier try whose commit went through unanswered."""
        t = tasks.c
        statement = select(t.id, t.runner_id, t.owner_epoch, t.last_seq).where(
            t.id.in_(list(entries))
        )
        async with self.database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return {
            row.id
            for row in rows
            if (row.runner_id, row.owner_epoch, row.last_seq)
            == (
                entries[row.id]["runner_id"],
                entries[row.id]["epoch"],
                entries[row.id]["last_seq"],
            )
        }

    async def end_owned(
        self,
        task: TaskRecord,
        fence: Fence,
        events: list[EventRow],
        *,
        status: TaskState,
        error_code: ErrorCode,
        message: str,
        at: datetime,
    ) -> bool:
        """Ends a task whose run is not live (cancelled in the queue, or one that cannot be
        resumed) with its closing events, held by `fence`; False when it was no longer
        unfinished or no longer held so: only a task's holder writes its events."""
        t = tasks.c
        async with self.announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(t.id == task.id, t.last_seq == task.last_seq)
                .where(t.status.in_(UNFINISHED))
                .where(t.runner_id == fence.runner_id, t.owner_epoch == fence.epoch)
                .values(
                    status=status,
                    error_code=error_code,
                    error_message=message,
                    finished_at=at,
                    last_seq=task.last_seq + len(events),
                    claimable_at=None,
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
            await notes.send(EVENTS, f"{task.id}:{task.last_seq + len(events)}")
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

    async def end_bare(self, task: TaskRecord, fence: Fence, *, message: str, at: datetime) -> None:
        """Ends a task held by `fence` `failed` with no more than a `done` event: for a task
        whose end could not be stored otherwise (whatever of its own data the database
        refuses is left out)."""
        t = tasks.c
        seq = task.last_seq + 1
        done = (
            f'{{"task_id":"{task.id}","chain_id":"{task.chain_id}",'
            f'"timestamp":"{at.isoformat()}","type":"done","final_state":"failed"}}'
        )
        async with self.announcing() as (connection, notes):
            result = await connection.execute(
                update(tasks)
                .where(t.id == task.id, t.status.in_(UNFINISHED))
                .where(t.runner_id == fence.runner_id, t.owner_epoch == fence.epoch)
                .values(
                    status=TaskState.FAILED,
                    error_code=ErrorCode.INTERNAL_ERROR,
                    error_message=message,
                    finished_at=at,
                    last_seq=seq,
                    claimable_at=None,
                )
            )
            if result.rowcount != 1:
                return
            await connection.execute(
                update(reasoning_chains)
                .where(reasoning_chains.c.id == task.chain_id)
                .values(
                    status=ChainStatus.FAILED,
                    error_code=ErrorCode.INTERNAL_ERROR,
                    error_message=message,
                    completed_at=at,
                )
            )
            await connection.execute(
                insert(task_events),
                [
                    {
                        "task_id": task.id,
                        "seq": seq,
                        "tenant_id": task.tenant_id,
                        "type": "done",
                        "data": RawJSON(done),
                    }
                ],
            )
            await notes.send(EVENTS, f"{task.id}:{seq}")


@dataclass(frozen=True, slots=True)
class _HereGroup:
    """A group of run writes as the embedded database stores them: on its thread, through a
    synchronous connection (see `Database.transact_here`)."""

    entries: dict[UUID, dict[str, Any]]
    chains: dict[UUID, dict[str, Any]]
    writes: Sequence[RunWrite]
    audits: Sequence[Mapping[str, Any]]

    def write(self, connection: Connection, *, batched: bool) -> set[UUID]:
        """The tasks whose writes were stored (their runs still hold them)."""
        entries, chains = self.entries, self.chains
        stored: set[UUID] = set()
        ordered = sorted(entries)
        if batched and ordered:
            fenced = [_task_write(entries[task_id]) for task_id in ordered]
            result = connection.execute(_TASK_WRITE, _one_or_many(fenced))
            if result.rowcount != len(fenced):
                raise _Refused
            stored.update(ordered)
        else:
            for task_id in ordered:
                result = connection.execute(_TASK_WRITE, _task_write(entries[task_id]))
                if result.rowcount == 1:
                    stored.add(task_id)
        changes = [
            _changes(chains[chain_id], RUN_CHAIN_COLUMNS)
            for chain_id in sorted(chains)
            if chains[chain_id]["task_id"] in stored
        ]
        if changes:
            connection.execute(_CHAIN_WRITE, _one_or_many(changes))
        kept = [write for write in self.writes if write.task_id in stored]
        costs = [row for write in kept for row in write.costs]
        for table, rows in (
            (reasoning_steps, [row for write in kept for row in write.steps]),
            (task_events, [row for write in kept for row in write.events]),
            (cost_records, costs),
            (audit_events, [*self.audits, *(row for write in kept for row in write.audits)]),
            (webhook_deliveries, [row for write in kept for row in write.deliveries]),
        ):
            if rows:
                connection.execute(insert(table), rows)
        for usage in daily_usage(costs, utc_now()):
            _add_usage(connection, usage)
        return stored


def _changes(entry: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """The parameters of `_coalesced` for an entry's changes (with its `row_id`)."""
    return {"row_id": entry["row_id"], **{f"new_{name}": entry.get(name) for name in columns}}


def _one_or_many(rows: list[dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    """One statement's parameters as a plain execution, several as a batch (`executemany`,
    whose path costs more than one execution)."""
    return rows[0] if len(rows) == 1 else rows


def _task_write(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **_changes(entry, RUN_TASK_COLUMNS),
        "fence_runner": entry["runner_id"],
        "fence_epoch": entry["epoch"],
        "fence_after": entry["after_seq"],
    }


def _coalesced(table: Table, columns: Sequence[str]) -> dict[str, Any]:
    """`column = COALESCE(:new_column, column)` for each: a change a write leaves out keeps
    what is stored, as in the group write. Built once: the embedded database's writer runs
    them for every group."""
    return {
        name: func.coalesce(bindparam(f"new_{name}", type_=table.c[name].type), table.c[name])
        for name in columns
    }


_TASK_WRITE = (
    update(tasks)
    .where(tasks.c.id == bindparam("row_id"), tasks.c.runner_id == bindparam("fence_runner"))
    .where(
        tasks.c.owner_epoch == bindparam("fence_epoch"),
        tasks.c.last_seq == bindparam("fence_after"),
    )
    .values(_coalesced(tasks, RUN_TASK_COLUMNS))
)
_CHAIN_WRITE = (
    update(reasoning_chains)
    .where(reasoning_chains.c.id == bindparam("row_id"))
    .values(_coalesced(reasoning_chains, RUN_CHAIN_COLUMNS))
)
_USAGE_KEY = (
    (model_usage.c.tenant_id == bindparam("key_tenant"))
    & (model_usage.c.day == bindparam("key_day"))
    & (model_usage.c.model == bindparam("key_model"))
)
_USAGE_READ = select(*(model_usage.c[name] for name in USAGE_SUMS)).where(_USAGE_KEY)
_USAGE_ADD = update(model_usage).where(_USAGE_KEY)


def _add_usage(connection: Connection, row: dict[str, Any]) -> None:
    """SQLite: adds a day's usage to the roll-up inside the writer's transaction. Money is
    exact text there, so the sum is made here in decimals, never by the database in floats."""
    key = {"key_tenant": row["tenant_id"], "key_day": row["day"], "key_model": row["model"]}
    current = connection.execute(_USAGE_READ, key).first()
    if current is None:
        connection.execute(insert(model_usage), [row])
        return
    sums = {name: getattr(current, name) + row[name] for name in USAGE_SUMS}
    connection.execute(_USAGE_ADD, {**key, **sums, "updated_at": row["updated_at"]})


def daily_usage(costs: Iterable[CostRow], at: datetime) -> list[dict[str, Any]]:
    """The `model_usage` increments of cost records: model calls summed per (tenant, UTC day,
    model), sorted by that key."""
    sums: dict[tuple[str, date, str], dict[str, Any]] = {}
    for cost in costs:
        model = cost["model"]
        if model is None:
            continue
        key = (cost["tenant_id"], cost["recorded_at"].astimezone(UTC).date(), model)
        row = sums.setdefault(
            key,
            {
                "tenant_id": key[0],
                "day": key[1],
                "model": model,
                "calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": Decimal(0),
                "unpriced_calls": 0,
                "updated_at": at,
            },
        )
        row["calls"] += 1
        row["input_tokens"] += cost["input_tokens"]
        row["output_tokens"] += cost["output_tokens"]
        if cost["cost_usd"] is not None:
            row["cost_usd"] += cost["cost_usd"]
        if cost["unpriced"]:
            row["unpriced_calls"] += 1
    return [sums[key] for key in sorted(sums)]
