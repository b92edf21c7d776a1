"""API keys as authentication reads them: verified on every request they are used for
(through a short per-process cache), refused at once on the instance that revokes them and on
the others within the cache time. Tenant admins create and revoke them through
`app.resources.api_keys`."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from uuid import UUID

from app.caches import TtlCache
from app.chain.models import utc_now
from app.governance.quotas import TenantQuotas
from app.security import AuthenticationFailed, Principal
from app.security.api_keys import key_subject, secret_digest, well_formed
from app.storage.api_key_lookups import key_by_digest, key_by_id, mark_used
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

    def revoked(self, record: ApiKeyRecord) -> None:
        """Forgets the key's cached verification: this process refuses it from now on."""
        self._cache.invalidate(record.secret_sha256)

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
