"""A tenant's audit log as its auditors read it: newest first, filtered, page by page."""

from app.governance.tenants import Tenant
from app.storage.audit import AuditFilter, AuditRepository
from app.storage.database import Database
from app.storage.records import AuditRecord

__all__ = ["AuditFilter", "audit_page"]


async def audit_page(
    database: Database,
    tenant: Tenant,
    wanted: AuditFilter,
    *,
    before_id: int | None = None,
    limit: int,
) -> list[AuditRecord]:
    """The tenant's `wanted` events newest first, before the event `before_id`, at most
    `limit + 1` (the extra one says there is more)."""
    async with database.read() as connection:
        return await AuditRepository(connection, tenant.id).page(
            wanted, before_id=before_id, limit=limit
        )
