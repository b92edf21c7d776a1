"""A tenant's audit log as its auditors read it: newest first, filtered, page by page."""

from datetime import datetime

from app.governance.tenants import Tenant
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.records import AuditRecord


async def audit_page(
    database: Database,
    tenant: Tenant,
    *,
    action: str | None = None,
    actor: str | None = None,
    resource_type: str | None = None,
    resource_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    before_id: int | None = None,
    limit: int,
) -> list[AuditRecord]:
    """The tenant's events newest first, before the event `before_id`, at most `limit + 1`
    (the extra one says there is more). `action` ending in `.*` matches a prefix
    (`tenant.*`); `since` is inclusive, `until` exclusive."""
    async with database.read() as connection:
        return await AuditRepository(connection, tenant.id).page(
            action=action,
            actor=actor,
            resource_type=resource_type,
            resource_id=resource_id,
            since=since,
            until=until,
            before_id=before_id,
            limit=limit,
        )
