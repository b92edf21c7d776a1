"""The audit log: appended to, read page by page within one tenant, never changed."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select

from app.storage.records import AuditRecord
from app.storage.repository import TenantScoped
from app.storage.tables import audit_events


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which of a tenant's events a read wants (None: any). `action` ending in `.*` matches a
    prefix (`tenant.*`); `since` is inclusive, `until` exclusive."""

    action: str | None = None
    actor: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class AuditRepository(TenantScoped):
    async def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Appends events of this tenant (each row's `tenant_id` is set here)."""
        if rows:
            await self.connection.execute(
                insert(audit_events), [{**row, "tenant_id": self.tenant_id} for row in rows]
            )

    async def page(
        self, wanted: "AuditFilter | None" = None, *, before_id: int | None = None, limit: int
    ) -> list[AuditRecord]:
        """The `wanted` events newest first, before the event `before_id`, at most `limit + 1`
        (the extra one says there is more)."""
        f = wanted or AuditFilter()
        c = audit_events.c
        statement = select(audit_events).where(c.tenant_id == self.tenant_id)
        if f.action is not None:
            if f.action.endswith(".*"):
                statement = statement.where(c.action.startswith(f.action[:-1], autoescape=True))
            else:
                statement = statement.where(c.action == f.action)
        if f.actor is not None:
            statement = statement.where(c.actor == f.actor)
        if f.resource_type is not None:
            statement = statement.where(c.resource_type == f.resource_type)
        if f.resource_id is not None:
            statement = statement.where(c.resource_id == f.resource_id)
        if f.since is not None:
            statement = statement.where(c.created_at >= f.since)
        if f.until is not None:
            statement = statement.where(c.created_at < f.until)
        if before_id is not None:
            statement = statement.where(c.id < before_id)
        statement = statement.order_by(c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        return [AuditRecord.model_validate(row._mapping) for row in rows]
