"""The costs of deleted tasks, kept as daily sums: before the retention purge or an erasure
deletes a task's cost records, they are added here, so a tenant's cost reports of any period
stay exact (grouped by anything but the task) and its bill stays right.

Sums are made here over Decimals (SQLite keeps money as text) and, for reports, by Postgres
over `numeric`: never in floats.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy import Integer, cast, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.tables import cost_records, purged_costs, tasks

# What a purged call is summed by: everything the cost reports group by, but its task.
_KEY = ("day", "model", "tool_name", "tool_type", "user_id", "agent_name", "strategy")


@dataclass(slots=True)
class PurgedSum:
    """Purged calls of one report group (`key`, and `split` within it)."""

    key: Any
    split: Any
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    unpriced_calls: int
    sandbox_s: Decimal = Decimal(0)


async def keep_costs(
    connection: AsyncConnection, tenant_id: str, task_ids: Sequence[UUID], *, at: datetime
) -> int:
    """Adds the cost records of the tenant's tasks `task_ids` to the sums, in the caller's
    transaction (which then deletes them); how many records were added."""
    c = cost_records.c
    statement = (
        select(
            c.recorded_at,
            c.model,
            c.tool_name,
            c.tool_type,
            c.user_id,
            tasks.c.agent_name,
            c.strategy,
            c.input_tokens,
            c.output_tokens,
            c.cost_usd,
            c.unpriced,
            c.sandbox_s,
        )
        .select_from(cost_records.outerjoin(tasks, tasks.c.id == c.task_id))
        .where(c.tenant_id == tenant_id, c.task_id.in_(task_ids))
    )
    rows = (await connection.execute(statement)).all()
    sums: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        day = row.recorded_at.astimezone(UTC).date()
        key = (
            day,
            row.model,
            row.tool_name,
            row.tool_type,
            row.user_id,
            row.agent_name,
            row.strategy,
        )
        entry = sums.setdefault(
            key,
            {
                **dict(zip(_KEY, key, strict=True)),
                "tenant_id": tenant_id,
                "calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": Decimal(0),
                "unpriced_calls": 0,
                "sandbox_s": None,
                "purged_at": at,
            },
        )
        entry["calls"] += 1
        entry["input_tokens"] += row.input_tokens
        entry["output_tokens"] += row.output_tokens
        if row.cost_usd is not None:
            entry["cost_usd"] += Decimal(row.cost_usd)
        if row.unpriced:
            entry["unpriced_calls"] += 1
        if row.sandbox_s is not None:
            entry["sandbox_s"] = (entry["sandbox_s"] or Decimal(0)) + Decimal(row.sandbox_s)
    if sums:
        await connection.execute(insert(purged_costs), list(sums.values()))
    return len(rows)


def _days(since: datetime, until: datetime) -> tuple[date, date]:
    """The UTC days whose start lies in `[since, until)`: a purged call counts in a period by
    its day (exact for periods from midnight to midnight, UTC)."""

    def first_day_from(moment: datetime) -> date:
        moment = moment.astimezone(UTC)
        day = moment.date()
        return day if moment.time() == time(0) else day + timedelta(days=1)

    return first_day_from(since), first_day_from(until)


def _column(group_by: str | None) -> Any:
    p = purged_costs.c
    if group_by is None or group_by == "task":  # their tasks are gone
        return cast(None, Integer)
    return {
        "day": p.day,
        "model": p.model,
        "tool": p.tool_name,
        "user": p.user_id,
        "agent": p.agent_name,
        "strategy": p.strategy,
    }[group_by]


async def purged_sums(
    connection: AsyncConnection,
    tenant_id: str,
    *,
    since: datetime,
    until: datetime,
    group_by: str | None,
    split_by: str | None,
) -> list[PurgedSum]:
    """The tenant's purged calls of the period, summed per `group_by` (and `split_by`), as
    `CostRepository.grouped` groups the records still kept."""
    p = purged_costs.c
    first, end = _days(since, until)
    key, split = _column(group_by), _column(split_by)
    where = (p.tenant_id == tenant_id, p.day >= first, p.day < end)
    if connection.dialect.name == "sqlite":
        statement = select(
            key.label("key"),
            split.label("split"),
            p.calls,
            p.input_tokens,
            p.output_tokens,
            p.cost_usd,
            p.unpriced_calls,
            p.sandbox_s,
        ).where(*where)
        sums: dict[tuple[Any, Any], PurgedSum] = {}
        for row in (await connection.execute(statement)).all():
            entry = sums.setdefault(
                (row.key, row.split), PurgedSum(row.key, row.split, 0, 0, 0, Decimal(0), 0)
            )
            if row.sandbox_s is not None:
                entry.sandbox_s += Decimal(row.sandbox_s)
            entry.calls += row.calls
            entry.input_tokens += row.input_tokens
            entry.output_tokens += row.output_tokens
            entry.cost_usd += Decimal(row.cost_usd)
            entry.unpriced_calls += row.unpriced_calls
        return list(sums.values())
    statement = (
        select(
            key.label("key"),
            split.label("split"),
            func.sum(p.calls).label("calls"),
            func.sum(p.input_tokens).label("input_tokens"),
            func.sum(p.output_tokens).label("output_tokens"),
            func.sum(p.cost_usd).label("cost_usd"),
            func.sum(p.unpriced_calls).label("unpriced_calls"),
            func.coalesce(func.sum(p.sandbox_s), 0).label("sandbox_s"),
        )
        .where(*where)
        .group_by(key, split)
    )
    return [
        PurgedSum(
            row.key,
            row.split,
            int(row.calls),
            int(row.input_tokens),
            int(row.output_tokens),
            Decimal(row.cost_usd),
            int(row.unpriced_calls),
            Decimal(row.sandbox_s),
        )
        for row in (await connection.execute(statement)).all()
    ]
