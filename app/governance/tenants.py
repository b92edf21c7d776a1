"""Tenants as requests and runs see them: status, enabled tools and visibility settings, read
through a short per-process cache (every authenticated request consults it)."""

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from app.caches import TtlCache
from app.chain.models import utc_now
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.security.visibility import VisibilityPolicy
from app.storage.database import Database
from app.storage.migrate import upgrade_to_head
from app.storage.records import TenantRecord
from app.storage.tenants import TenantExists, TenantRepository

DEFAULT_TENANT = "default"
# Tenants cached at most (ids come from tokens: the cache stays bounded).
_MAX_CACHED = 10_000


@dataclass(frozen=True, slots=True)
class Tenant:
    record: TenantRecord
    visibility: VisibilityPolicy
    quotas: TenantQuotas
    models: ModelPolicy

    @classmethod
    def of(cls, record: TenantRecord) -> "Tenant":
        return cls(
            record,
            VisibilityPolicy.model_validate(record.visibility),
            quotas_of(record),
            ModelPolicy.model_validate(record.models),
        )

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def is_active(self) -> bool:
        return self.record.is_active

    @property
    def enabled_tools(self) -> frozenset[str] | None:
        """The tools its runs may use; None: every registered tool."""
        tools = self.record.enabled_tools
        return None if tools is None else frozenset(tools)


class TenantDirectory:
    """Tenants by id, each cached for `ttl_s`. A change made through this process is seen at
    once (`put`); one made by another instance after at most `ttl_s`."""

    def __init__(
        self,
        database: Database,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._cache = TtlCache[str, Tenant | None](
            ttl_s=ttl_s, max_entries=_MAX_CACHED, clock=clock
        )

    async def get(self, tenant_id: str) -> Tenant | None:
        return await self._cache.get_or_load(tenant_id, partial(self._read, tenant_id))

    def put(self, record: TenantRecord) -> Tenant:
        tenant = Tenant.of(record)
        self._cache.put(record.id, tenant)
        return tenant

    async def _read(self, tenant_id: str) -> Tenant | None:
        async with self._database.read() as connection:
            record = await TenantRepository(connection).get(tenant_id)
        return None if record is None else Tenant.of(record)


def quotas_of(record: TenantRecord) -> TenantQuotas:
    """A tenant's quotas; its default budget is kept in a column of its own."""
    return TenantQuotas.model_validate({**record.quotas, "default_budget": record.default_budget})


def quotas_columns(quotas: TenantQuotas) -> dict[str, Any]:
    """The `tenants` columns that store `quotas`."""
    document = quotas.model_dump(mode="json", exclude_defaults=True)
    budget = document.pop("default_budget", {})
    return {"quotas": document, "default_budget": budget}


async def ensure_default_tenant(database: Database) -> None:
    """Development: the `default` tenant exists, so a fresh install works with no setup."""
    async with database.read() as connection:
        if await TenantRepository(connection).get(DEFAULT_TENANT) is not None:
            return
    with contextlib.suppress(TenantExists):  # another process starting at once made it
        async with database.transaction() as connection:
            await TenantRepository(connection).create(DEFAULT_TENANT, "Default", at=utc_now())


async def command_tenant(database: Database, tenant_id: str, *, development: bool) -> Tenant | None:
    """The tenant a command run on the service's machine acts in, with the database migrated
    first; in development the `default` tenant is made if need be, as the server does at
    start-up. None when there is no such tenant."""
    await upgrade_to_head(database)
    if development and tenant_id == DEFAULT_TENANT:
        await ensure_default_tenant(database)
    return await TenantDirectory(database, ttl_s=0).get(tenant_id)
