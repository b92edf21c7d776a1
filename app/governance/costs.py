"""Usage and cost reports of a tenant: its costs grouped as asked, its daily model usage, and
one task's cost records (its sub-agents' included). Figures are exact decimals."""

from dataclasses import dataclass
from datetime import date, datetime

from app.errors import Forbidden
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.security.rbac import Permission
from app.storage.costs import (
    CostOrder,
    CostRepository,
    Group,
    GroupBy,
    Totals,
    UsageRow,
    sum_records,
)
from app.storage.database import Database
from app.storage.records import CostRecordRow, TaskRecord

__all__ = [  # the value types of the reports, for those that render them
    "CostOrder",
    "CostReports",
    "GroupBy",
    "GroupedCosts",
    "TaskCostRecords",
    "Totals",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class GroupedCosts:
    """A period's costs per group (at most the limit asked), the totals of every call of the
    period, and whether groups were left out."""

    groups: list[Group]
    totals: Totals
    truncated: bool


@dataclass(frozen=True, slots=True)
class Usage:
    """A period's model usage per UTC day and model (in that order), per model (by name), and
    in all."""

    days: list[UsageRow]
    models: list[tuple[str, Totals]]
    totals: Totals


@dataclass(frozen=True, slots=True)
class TaskCostRecords:
    """A task's cost records (its sub-agents' tasks' included), in the order they were
    recorded, and their totals."""

    records: list[CostRecordRow]
    totals: Totals


@dataclass(frozen=True, slots=True)
class CostReports:
    """Reports over the tenants' cost records and daily usage roll-up in `database`. Calls of
    tasks deleted since (retention, erasure) still count, by their UTC day."""

    database: Database

    async def grouped(
        self,
        tenant: Tenant,
        *,
        since: datetime,
        until: datetime,
        group_by: GroupBy | None,
        split_by: GroupBy | None,
        order: CostOrder,
        limit: int,
    ) -> GroupedCosts:
        """Calls with `since <= recorded_at < until`, summed per `group_by` (none: totals
        only) and within it per `split_by`; at most `limit` groups, by key or (`order=cost`)
        the costliest first."""
        async with self.database.read() as connection:
            groups, totals, truncated = await CostRepository(connection, tenant.id).grouped(
                since=since,
                until=until,
                group_by=group_by,
                split_by=split_by,
                order=order,
                limit=limit,
            )
        return GroupedCosts(groups, totals, truncated)

    async def usage(self, tenant: Tenant, *, since: date, until: date) -> Usage:
        """The daily roll-up of model calls for the UTC days `since <= day < until`."""
        async with self.database.read() as connection:
            rows = await CostRepository(connection, tenant.id).usage(since=since, until=until)
        per_model: dict[str, Totals] = {}
        totals = Totals()
        for row in rows:
            per_model.setdefault(row.model, Totals()).add(row.totals)
            totals.add(row.totals)
        return Usage(rows, sorted(per_model.items()), totals)

    async def of_task(self, caller: Caller, task: TaskRecord) -> TaskCostRecords:
        """The task's cost records. Needs `cost:view`, except for the task's own submitter
        (who may read tasks)."""
        own = task.user_id == caller.subject and Permission.TASK_READ in caller.permissions
        if not own and Permission.COST_VIEW not in caller.permissions:
            raise Forbidden(
                "this needs the `cost:view` permission (or to be the task's submitter)",
                permission=Permission.COST_VIEW,
            )
        async with self.database.read() as connection:
            records = await CostRepository(connection, caller.tenant_id).of_task(task.id)
        return TaskCostRecords(records, sum_records(records))
