"""Cost records and the daily model-usage roll-up of one tenant, for reports.

Figures are exact: Postgres sums `numeric`; SQLite keeps money as text, so there the sums are
made here over Decimals, never by the database in floats.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal
from uuid import UUID

from sqlalchemy import Date, FromClause, Integer, Select, case, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.purged_costs import PurgedSum, purged_sums
from app.storage.records import CostRecordRow
from app.storage.tables import cost_records, model_usage, tasks

GroupBy = Literal["model", "day", "tool", "task", "user", "agent", "strategy"]
CostOrder = Literal["key", "cost"]


@dataclass(slots=True)
class Totals:
    """Calls and their usage, summed."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = field(default_factory=lambda: Decimal(0))
    unpriced_calls: int = 0
    # CPU seconds of sandbox calls.
    sandbox_s: Decimal = field(default_factory=lambda: Decimal(0))

    def count(self, record: Any) -> None:
        """Adds one call: anything with its tokens, `cost_usd` (None: unpriced), `unpriced`
        and `sandbox_s` (None: not a sandbox call)."""
        self.calls += 1
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        if record.cost_usd is not None:
            self.cost_usd += Decimal(record.cost_usd)
        if record.unpriced:
            self.unpriced_calls += 1
        if record.sandbox_s is not None:
            self.sandbox_s += Decimal(record.sandbox_s)

    def add(self, other: "Totals") -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.unpriced_calls += other.unpriced_calls
        self.sandbox_s += other.sandbox_s


@dataclass(slots=True)
class Group:
    key: str | None
    totals: Totals
    split: str | None = None


@dataclass(slots=True)
class UsageRow:
    day: date
    model: str
    totals: Totals


class CostRepository:
    def __init__(self, connection: AsyncConnection, tenant_id: str) -> None:
        self.connection = connection
        self.tenant_id = tenant_id
        self._sqlite = connection.dialect.name == "sqlite"

    async def of_task(self, task_id: UUID) -> list[CostRecordRow]:
        """The task's records and those of its sub-agents' tasks (its family below it), in
        the order they were recorded."""
        family = [task_id]
        generation = [task_id]
        while generation:  # a family is a few generations deep (OMNIFORGE_MAX_AGENT_DEPTH)
            below = select(tasks.c.id).where(
                tasks.c.tenant_id == self.tenant_id, tasks.c.parent_task_id.in_(generation)
            )
            generation = list((await self.connection.scalars(below)).all())
            family.extend(generation)
        c = cost_records.c
        statement = (
            select(cost_records)
            .where(c.tenant_id == self.tenant_id, c.task_id.in_(family))
            .order_by(c.id)
        )
        rows = (await self.connection.execute(statement)).all()
        return [CostRecordRow.model_validate(row._mapping) for row in rows]

    async def grouped(
        self,
        *,
        since: datetime,
        until: datetime,
        group_by: GroupBy | None,
        limit: int,
        split_by: GroupBy | None = None,
        order: CostOrder = "key",
    ) -> tuple[list[Group], Totals, bool]:
        """Records with `since <= recorded_at < until` (and the daily sums of deleted tasks'
        records whose UTC day starts in that period), summed per group (by `group_by`, and
        within it by `split_by` if given; at most `limit` groups, by key or by cost, highest
        first), the totals of all of them, and whether groups were left out."""
        c = cost_records.c
        key, split = self._key(group_by), self._key(split_by)
        source: FromClause = cost_records
        if "agent" in (group_by, split_by):
            # A record's agent is its task's (tasks without one, plain model tasks: null).
            source = cost_records.outerjoin(
                tasks, (tasks.c.id == c.task_id) & (tasks.c.tenant_id == c.tenant_id)
            )
        where = (c.tenant_id == self.tenant_id, c.recorded_at >= since, c.recorded_at < until)
        if self._sqlite:
            statement: Select[Any] = (
                select(
                    key.label("key"),
                    split.label("split"),
                    c.input_tokens,
                    c.output_tokens,
                    c.cost_usd,
                    c.unpriced,
                    c.sandbox_s,
                )
                .select_from(source)
                .where(*where)
            )
            rows = (await self.connection.execute(statement)).all()
            groups = _sum_in_python(rows)
        else:
            statement = (
                select(
                    key.label("key"),
                    split.label("split"),
                    func.count().label("calls"),
                    func.sum(c.input_tokens).label("input_tokens"),
                    func.sum(c.output_tokens).label("output_tokens"),
                    func.coalesce(func.sum(c.cost_usd), 0).label("cost_usd"),
                    func.sum(case((c.unpriced, 1), else_=0)).label("unpriced_calls"),
                    func.coalesce(func.sum(c.sandbox_s), 0).label("sandbox_s"),
                )
                .select_from(source)
                .where(*where)
                .group_by(key, split)
            )
            rows = (await self.connection.execute(statement)).all()
            groups = [_group(row) for row in rows]
        # The calls of tasks deleted since (retention, erasure) count by their daily sums.
        purged = await purged_sums(
            self.connection,
            self.tenant_id,
            since=since,
            until=until,
            group_by=group_by,
            split_by=split_by,
        )
        groups = _with_purged(groups, purged)
        groups.sort(key=lambda g: (g.key is None, g.key or "", g.split is None, g.split or ""))
        if order == "cost":
            groups.sort(key=lambda g: g.totals.cost_usd, reverse=True)  # stable: ties by key
        totals = Totals()
        for group in groups:
            totals.add(group.totals)
        if group_by is None:
            return [], totals, False
        return groups[:limit], totals, len(groups) > limit

    async def usage(self, *, since: date, until: date) -> list[UsageRow]:
        """The daily roll-up for `since <= day < until`, by day then model."""
        u = model_usage.c
        statement = (
            select(model_usage)
            .where(u.tenant_id == self.tenant_id, u.day >= since, u.day < until)
            .order_by(u.day, u.model)
        )
        rows = (await self.connection.execute(statement)).all()
        return [
            UsageRow(
                row.day,
                row.model,
                Totals(
                    row.calls,
                    row.input_tokens,
                    row.output_tokens,
                    Decimal(row.cost_usd),
                    row.unpriced_calls,
                ),
            )
            for row in rows
        ]

    def _key(self, group_by: GroupBy | None) -> Any:
        c = cost_records.c
        if group_by is None:
            return cast(None, Integer)
        if group_by == "day":
            # SQLite's days are taken from recorded_at afterwards (stored as UTC text).
            return (
                c.recorded_at if self._sqlite else cast(func.timezone("UTC", c.recorded_at), Date)
            )
        return {
            "model": c.model,
            "tool": c.tool_name,
            "task": c.task_id,
            "user": c.user_id,
            "agent": tasks.c.agent_name,
            "strategy": c.strategy,
        }[group_by]


def _key_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _group(row: Any) -> Group:
    return Group(
        _key_text(row.key),
        Totals(
            int(row.calls),
            int(row.input_tokens or 0),
            int(row.output_tokens or 0),
            Decimal(row.cost_usd or 0),
            int(row.unpriced_calls or 0),
            Decimal(row.sandbox_s or 0),
        ),
        _key_text(row.split),
    )


def _with_purged(groups: list[Group], purged: Sequence[PurgedSum]) -> list[Group]:
    if not purged:
        return groups
    merged = {(group.key, group.split): group for group in groups}
    for entry in purged:
        key, split = _key_text(entry.key), _key_text(entry.split)
        group = merged.setdefault((key, split), Group(key, Totals(), split))
        group.totals.add(
            Totals(
                entry.calls,
                entry.input_tokens,
                entry.output_tokens,
                entry.cost_usd,
                entry.unpriced_calls,
                entry.sandbox_s,
            )
        )
    return list(merged.values())


def _sum_in_python(rows: Sequence[Any]) -> list[Group]:
    groups: dict[tuple[str | None, str | None], Totals] = {}
    for row in rows:
        key = (_key_text(row.key), _key_text(row.split))
        groups.setdefault(key, Totals()).count(row)
    return [Group(key, totals, split) for (key, split), totals in groups.items()]


def sum_records(records: Iterable[CostRecordRow]) -> Totals:
    totals = Totals()
    for record in records:
        totals.count(record)
    return totals
