"""A tenant's usage by time, as its limit windows count it: its model calls (cost records, and
the daily sums of those of tasks deleted since) and its submissions (tasks)."""

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from uuid import UUID

from sqlalchemy import select

from app.chain import ToolType
from app.storage.repository import TenantScoped
from app.storage.tables import cost_records, purged_costs, tasks


@dataclass(frozen=True, slots=True)
class RecordedCall:
    correlation_id: UUID
    recorded_at: datetime
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None  # None: unpriced


@dataclass(slots=True)
class PurgedCalls:
    """Calls of deleted tasks made on `day` (UTC), before `purged_at`, summed."""

    day: date
    purged_at: datetime
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class Submission:
    task_id: UUID
    created_at: datetime


class UsageHistory(TenantScoped):
    async def model_calls(
        self, since: datetime, *, api_key_id: UUID | None = None
    ) -> list[RecordedCall]:
        """The tenant's model calls recorded at or after `since`; with `api_key_id`, only
        those of tasks submitted with that API key."""
        c = cost_records.c
        statement = select(
            c.correlation_id, c.recorded_at, c.input_tokens, c.output_tokens, c.cost_usd
        ).where(
            c.tenant_id == self.tenant_id,
            c.recorded_at >= since,
            c.tool_type == ToolType.LLM.value,
        )
        if api_key_id is not None:
            statement = statement.join(
                tasks, (tasks.c.id == c.task_id) & (tasks.c.tenant_id == c.tenant_id)
            ).where(tasks.c.api_key_id == api_key_id)
        rows = (await self.connection.execute(statement)).all()
        return [
            RecordedCall(
                row.correlation_id,
                row.recorded_at,
                row.input_tokens,
                row.output_tokens,
                None if row.cost_usd is None else Decimal(row.cost_usd),
            )
            for row in rows
        ]

    async def purged_model_calls(self, since: datetime) -> list[PurgedCalls]:
        """The tenant's model calls made since the day of `since` whose tasks were deleted at
        or after `since`, summed per day and deletion (exactly, in decimals)."""
        p = purged_costs.c
        statement = select(
            p.day, p.purged_at, p.calls, p.input_tokens, p.output_tokens, p.cost_usd
        ).where(
            p.tenant_id == self.tenant_id,
            p.day >= since.date(),
            p.purged_at >= since,
            p.tool_type == ToolType.LLM.value,
        )
        sums: dict[tuple[date, datetime], PurgedCalls] = {}
        for row in (await self.connection.execute(statement)).all():
            entry = sums.setdefault((row.day, row.purged_at), PurgedCalls(row.day, row.purged_at))
            entry.calls += row.calls
            entry.input_tokens += row.input_tokens
            entry.output_tokens += row.output_tokens
            entry.cost_usd += Decimal(row.cost_usd)
        return list(sums.values())

    async def submissions(
        self, since: datetime, *, api_key_id: UUID | None = None
    ) -> list[Submission]:
        """The tenant's tasks submitted at or after `since` (not its sub-agents' tasks); with
        `api_key_id`, only those submitted with that API key."""
        t = tasks.c
        statement = select(t.id, t.created_at).where(
            t.tenant_id == self.tenant_id, t.created_at >= since, t.parent_task_id.is_(None)
        )
        if api_key_id is not None:
            statement = statement.where(t.api_key_id == api_key_id)
        rows = (await self.connection.execute(statement)).all()
        return [Submission(row.id, row.created_at) for row in rows]
