"""API keys: created by tenant admins with at most their own permissions, verified on every
request they are used for (through a short per-process cache), revoked at once on the instance
that revokes them and on the others within the cache time."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID, uuid4

from app.caches import TtlCache
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.governance.audit import AuditAction, audit_row
from app.governance.quotas import TenantQuotas
from app.security import AuthenticationFailed, Principal
from app.security.api_keys import key_subject, new_api_key, secret_digest, well_formed
from app.security.rbac import Role, crosses_tenants, permissions_of
from app.storage.api_keys import ApiKeyRepository, key_by_digest, key_by_id, mark_used
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.records import ApiKeyRecord

# A key's last use is written at most this often (one write per key per minute, not one per
# request).
USE_RECORDED_EVERY = timedelta(minutes=1)
# Verifications cached at most (unknown secrets come from callers: the cache stays bounded).
_MAX_CACHED = 10_000


@dataclass(frozen=True, slots=True)
class KeyGrant:
    """What a verified key brings to its requests: who it acts as, and its own limits."""

    principal: Principal
    key_id: UUID
    name: str
    quotas: TenantQuotas | None

    @property
    def scope(self) -> str:
        """The name its own limit windows are kept under."""
        return f"{self.principal.tenant_id}/api-key/{self.key_id}"


class RolesExceedCreator(OmniForgeError):
    """A key would get permissions its creator does not have."""

    def __init__(self, extra: Sequence[str]) -> None:
        super().__init__(f"a key cannot have permissions its creator lacks: {', '.join(extra)}")
        self.extra = list(extra)


class ApiKeys:
    """Keys by secret, each verification cached for `ttl_s` (0: none); the process that
    revokes a key forgets it at once."""

    def __init__(
        self,
        database: Database,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._cache = TtlCache[str, ApiKeyRecord | None](
            ttl_s=ttl_s, max_entries=_MAX_CACHED, clock=clock
        )

    async def create(
        self,
        tenant_id: str,
        *,
        name: str,
        roles: Sequence[str],
        creator_roles: Sequence[str],
        by: str,
        expires_at: datetime | None = None,
        quotas: TenantQuotas | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key and its secret (which is not stored: this is the only time it exists)."""
        extra = sorted(str(p) for p in permissions_of(roles) - permissions_of(creator_roles))
        if crosses_tenants(roles) and not crosses_tenants(creator_roles):
            extra.append(f"the {Role.PLATFORM_ADMIN} role (every tenant)")
        if extra:
            raise RolesExceedCreator(extra)
        secret, prefix = new_api_key()
        now = utc_now()
        async with self._database.transaction() as connection:
            record = await ApiKeyRepository(connection, tenant_id).create(
                key_id=uuid4(),
                name=name,
                prefix=prefix,
                secret_sha256=secret_digest(secret),
                roles=sorted(set(roles)),
                quotas=None
                if quotas is None
                else quotas.model_dump(mode="json", exclude_defaults=True),
                by=by,
                at=now,
                expires_at=expires_at,
            )
            await AuditRepository(connection, tenant_id).append(
                [_audit(AuditAction.API_KEY_CREATE, record, by, now)]
            )
        return record, secret

    async def revoke(self, tenant_id: str, key_id: UUID, *, by: str) -> ApiKeyRecord | None:
        now = utc_now()
        async with self._database.transaction() as connection:
            record = await ApiKeyRepository(connection, tenant_id).revoke(key_id, by=by, at=now)
            if record is not None and record.revoked_at == now:
                await AuditRepository(connection, tenant_id).append(
                    [_audit(AuditAction.API_KEY_REVOKE, record, by, now)]
                )
        if record is not None:
            self._cache.invalidate(record.secret_sha256)
        return record

    async def verify(self, secret: str) -> KeyGrant:
        """The grant of a usable key; `AuthenticationFailed` for any other secret."""
        if not well_formed(secret):
            raise AuthenticationFailed("the API key is malformed")
        digest = secret_digest(secret)
        record = await self._cache.get_or_load(digest, partial(self._read, digest))
        now = utc_now()
        if record is None:
            raise AuthenticationFailed("the API key is not valid")
        if record.revoked_at is not None:
            raise AuthenticationFailed("the API key was revoked")
        if record.expires_at is not None and now >= record.expires_at:
            raise AuthenticationFailed("the API key has expired")
        if record.last_used_at is None or now - record.last_used_at >= USE_RECORDED_EVERY:
            await self._mark_used(digest, record, now)
        principal = Principal(
            subject=key_subject(record.prefix),
            tenant_id=record.tenant_id,
            roles=frozenset(record.roles),
            api_key=str(record.id),
        )
        quotas = None if record.quotas is None else TenantQuotas.model_validate(record.quotas)
        return KeyGrant(principal, record.id, record.name, quotas)

    async def check_usable(self, key_id: UUID) -> None:
        """`AuthenticationFailed` unless the key `key_id` is unrevoked and unexpired now, as
        the database says (not this instance's cache, which another instance's revocation does
        not reach): for a credential minted from the key (a stream ticket), checked once when
        it is used."""
        async with self._database.read() as connection:
            record = await key_by_id(connection, key_id)
        if record is None or record.revoked_at is not None:
            raise AuthenticationFailed("the API key the stream ticket was issued for was revoked")
        if not record.usable_at(utc_now()):
            raise AuthenticationFailed("the API key the stream ticket was issued for has expired")

    async def grant(self, key_id: UUID) -> KeyGrant | None:
        """A key's grant by id, revoked or expired or not (None when it no longer exists):
        the limits a task submitted with it ran under, for its run to go on under them."""
        async with self._database.read() as connection:
            record = await key_by_id(connection, key_id)
        if record is None:
            return None
        principal = Principal(
            subject=key_subject(record.prefix),
            tenant_id=record.tenant_id,
            roles=frozenset(record.roles),
            api_key=str(record.id),
        )
        quotas = None if record.quotas is None else TenantQuotas.model_validate(record.quotas)
        return KeyGrant(principal, record.id, record.name, quotas)

    async def _read(self, digest: str) -> ApiKeyRecord | None:
        async with self._database.read() as connection:
            return await key_by_digest(connection, digest)

    async def _mark_used(self, digest: str, record: ApiKeyRecord, at: datetime) -> None:
        async with self._database.transaction() as connection:
            await mark_used(connection, record.id, at)
        # On what is cached now, which a revocation may have replaced meanwhile.
        self._cache.update(digest, partial(_used_at, at=at))


def _used_at(record: ApiKeyRecord | None, *, at: datetime) -> ApiKeyRecord | None:
    return None if record is None else record.model_copy(update={"last_used_at": at})


def _audit(action: AuditAction, record: ApiKeyRecord, by: str, at: datetime) -> dict[str, Any]:
    return audit_row(
        actor=by,
        action=action,
        resource_type="api_key",
        resource_id=str(record.id),
        details={"name": record.name, "prefix": record.prefix, "roles": record.roles},
        at=at,
    )
