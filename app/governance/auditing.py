"""Audit events of what callers read and change: one helper records a change of a tenant's
configuration with who made it and what it was before and after, in the transaction that
makes it."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.security.visibility import ReaderView
from app.storage.audit import AuditRepository


def chain_read(
    caller: Caller,
    *,
    action: AuditAction,
    chain_id: UUID,
    task_id: UUID,
    view: ReaderView,
    **details: Any,
) -> dict[str, Any]:
    """The audit row of a chain read (or stream opening): who read which chain, and which
    view it was served. Stored through `RunManager.record_audit`, with the runs' writes."""
    row = audit_row(
        actor=caller.subject,
        action=action,
        resource_type="chain",
        resource_id=str(chain_id),
        details={
            "task_id": str(task_id),
            "served": view.served,
            "roles": sorted(caller.roles),
            **details,
        },
        at=utc_now(),
    )
    return {**row, "tenant_id": caller.tenant_id}


async def record_change(
    connection: AsyncConnection,
    caller: Caller,
    tenant_id: str,
    *,
    action: AuditAction,
    before: Any,
    after: Any,
    resource_type: str = "tenant",
    resource_id: str | None = None,
) -> None:
    """A change of a tenant's configuration (by default the tenant itself, else the resource
    named): who, and what it was before and after."""
    row = audit_row(
        actor=caller.subject,
        action=action,
        resource_type=resource_type,
        resource_id=tenant_id if resource_id is None else resource_id,
        details={"before": before, "after": after, "actor_tenant": caller.tenant_id},
        at=utc_now(),
    )
    await AuditRepository(connection, tenant_id).append([row])


class _Identified(Protocol):
    @property
    def id(self) -> UUID: ...


R = TypeVar("R", bound=_Identified)


@dataclass(frozen=True, slots=True)
class ResourceAudit(Generic[R]):
    """Audits changes of one kind of a tenant's configured resource (MCP servers, remote
    agents): each as `document` keeps it (of the `fields` changed, for an update)."""

    resource_type: str
    document: Callable[[R, set[str] | None], dict[str, Any]]

    async def __call__(
        self,
        connection: AsyncConnection,
        caller: Caller,
        tenant: Tenant,
        action: AuditAction,
        before: R | None,
        after: R | None,
        fields: set[str] | None = None,
    ) -> None:
        subject = after or before
        assert subject is not None
        await record_change(
            connection,
            caller,
            tenant.id,
            action=action,
            before=None if before is None else self.document(before, fields),
            after=None if after is None else self.document(after, fields),
            resource_type=self.resource_type,
            resource_id=str(subject.id),
        )
