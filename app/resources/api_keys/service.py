"""A tenant's API keys on behalf of its admins: created with at most their creator's
permissions, each change stored with its audit row in one transaction; a revoked key is
refused by this process at once."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from app.chain.models import utc_now
from app.errors import NotFound, OmniForgeError
from app.governance.api_keys import ApiKeys
from app.governance.audit import AuditAction, audit_row
from app.governance.callers import Caller
from app.governance.quotas import TenantQuotas
from app.governance.tenants import Tenant
from app.ids import uuid4
from app.resources.api_keys.store import ApiKeyRepository
from app.security.api_keys import new_api_key, secret_digest
from app.security.rbac import Role, crosses_tenants, permissions_of
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.pagination import Cursor, Page
from app.storage.records import ApiKeyRecord


class RolesExceedCreator(OmniForgeError):
    """A key would get permissions its creator does not have."""

    def __init__(self, extra: Sequence[str]) -> None:
        super().__init__(f"a key cannot have permissions its creator lacks: {', '.join(extra)}")
        self.extra = list(extra)


@dataclass(frozen=True, slots=True)
class ApiKeyService:
    """A tenant's API keys; `keys`, the verifications this process caches, forgets a key it
    revokes."""

    database: Database
    keys: ApiKeys

    async def create(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        name: str,
        roles: Sequence[str],
        expires_at: datetime | None = None,
        quotas: TenantQuotas | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key and its secret (which is not stored: this is the only time it exists).
        Its roles give together at most the permissions of the caller's
        (`RolesExceedCreator`)."""
        extra = sorted(str(p) for p in permissions_of(roles) - permissions_of(caller.roles))
        if crosses_tenants(roles) and not crosses_tenants(caller.roles):
            extra.append(f"the {Role.PLATFORM_ADMIN} role (every tenant)")
        if extra:
            raise RolesExceedCreator(extra)
        secret, prefix = new_api_key()
        now = utc_now()
        async with self.database.transaction() as connection:
            record = await ApiKeyRepository(connection, tenant.id).create(
                key_id=uuid4(),
                name=name,
                prefix=prefix,
                secret_sha256=secret_digest(secret),
                roles=sorted(set(roles)),
                quotas=None
                if quotas is None
                else quotas.model_dump(mode="json", exclude_defaults=True),
                by=caller.subject,
                at=now,
                expires_at=expires_at,
            )
            await AuditRepository(connection, tenant.id).append(
                [_audit(AuditAction.API_KEY_CREATE, record, caller.subject, now)]
            )
        return record, secret

    async def page(
        self, tenant: Tenant, *, cursor: Cursor | None, limit: int, include_revoked: bool
    ) -> Page[ApiKeyRecord]:
        """Newest first; revoked keys only with `include_revoked`."""
        async with self.database.read() as connection:
            return await ApiKeyRepository(connection, tenant.id).page(
                cursor=cursor, limit=limit, include_revoked=include_revoked
            )

    async def get(self, tenant: Tenant, key_id: UUID) -> ApiKeyRecord:
        async with self.database.read() as connection:
            record = await ApiKeyRepository(connection, tenant.id).get(key_id)
        if record is None:
            raise NotFound("API key", key_id)
        return record

    async def revoke(self, caller: Caller, tenant: Tenant, key_id: UUID) -> ApiKeyRecord:
        """Revokes the key; revoking a revoked one changes nothing (and is not audited)."""
        now = utc_now()
        async with self.database.transaction() as connection:
            record = await ApiKeyRepository(connection, tenant.id).revoke(
                key_id, by=caller.subject, at=now
            )
            if record is not None and record.revoked_at == now:
                await AuditRepository(connection, tenant.id).append(
                    [_audit(AuditAction.API_KEY_REVOKE, record, caller.subject, now)]
                )
        if record is None:
            raise NotFound("API key", key_id)
        self.keys.revoked(record)
        return record


def _audit(action: AuditAction, record: ApiKeyRecord, by: str, at: datetime) -> dict[str, Any]:
    """A key as the audit log keeps it: its name, prefix and roles, never its secret."""
    return audit_row(
        actor=by,
        action=action,
        resource_type="api_key",
        resource_id=str(record.id),
        details={"name": record.name, "prefix": record.prefix, "roles": record.roles},
        at=at,
    )
