"""One kind of a tenant's configured resources (MCP servers, remote agents, webhook
endpoints), read, changed and removed by id: each change stored with its audit row in the
transaction that makes it. The services of those resources add what is their own around it
(checks before, the process told after)."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.errors import NotFound
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.storage.database import Database

R = TypeVar("R")


class TenantRows(Protocol[R]):
    """A repository of one kind of resource, scoped to a tenant."""

    async def all(self) -> list[R]: ...

    async def get(self, record_id: UUID, /) -> R | None: ...

    async def update(
        self, record_id: UUID, changes: dict[str, Any], /, *, at: datetime
    ) -> R | None: ...

    async def delete(self, record_id: UUID, /) -> bool: ...


def _every_field(changed: set[str]) -> set[str] | None:
    """An update's audit row documents the fields changed."""
    return changed


@dataclass(frozen=True, slots=True)
class AuditedRows(Generic[R]):
    """The resources of `rows` (a tenant's repository on a connection), audited by `audit`
    as `updated` and `deleted`; one that is not the tenant's is a `NotFound` of `noun`.
    `audited_fields` gives an update's audit row its fields from those changed (None: the
    whole document; an empty set: nothing to audit)."""

    database: Database
    rows: Callable[[AsyncConnection, str], TenantRows[R]]
    audit: ResourceAudit[Any]
    noun: str
    updated: AuditAction
    deleted: AuditAction
    audited_fields: Callable[[set[str]], set[str] | None] = _every_field

    async def all(self, tenant: Tenant) -> list[R]:
        async with self.database.read() as connection:
            return await self.rows(connection, tenant.id).all()

    async def get(self, tenant: Tenant, record_id: UUID) -> R:
        async with self.database.read() as connection:
            record = await self.rows(connection, tenant.id).get(record_id)
        if record is None:
            raise self.not_found(record_id)
        return record

    async def update(
        self, caller: Caller, tenant: Tenant, record_id: UUID, changes: dict[str, Any]
    ) -> tuple[R, dict[str, Any]]:
        """Sets those of `changes` (columns) that differ from what is stored, with their
        audit row; returns the record and the changes made (none: nothing was stored)."""
        async with self.database.transaction() as connection:
            rows = self.rows(connection, tenant.id)
            before = await rows.get(record_id)
            if before is None:
                raise self.not_found(record_id)
            changes = {
                name: value for name, value in changes.items() if getattr(before, name) != value
            }
            if not changes:
                return before, changes
            record = await rows.update(record_id, changes, at=utc_now())
            assert record is not None
            fields = self.audited_fields(set(changes))
            if fields is None or fields:
                await self.audit(connection, caller, tenant, self.updated, before, record, fields)
        return record, changes

    async def delete(self, caller: Caller, tenant: Tenant, record_id: UUID) -> R:
        """Removes the resource, with its audit row; returns it as it was."""
        async with self.database.transaction() as connection:
            rows = self.rows(connection, tenant.id)
            before = await rows.get(record_id)
            if before is None or not await rows.delete(record_id):
                raise self.not_found(record_id)
            await self.audit(connection, caller, tenant, self.deleted, before, None)
        return before

    def not_found(self, record_id: UUID) -> NotFound:
        return NotFound(self.noun, str(record_id))
