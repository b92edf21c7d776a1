"""Tenants: the rows every other table's `tenant_id` names. Not tenant-scoped themselves:
who may see which tenant is decided above, by the caller's roles."""

import ipaddress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.errors import OmniForgeError
from app.storage.records import TenantRecord
from app.storage.tables import tenants


class TenantExists(OmniForgeError):
    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"tenant {tenant_id!r} already exists")
        self.tenant_id = tenant_id


class TenantRepository:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def get(self, tenant_id: str, *, for_update: bool = False) -> TenantRecord | None:
        statement = select(tenants).where(tenants.c.id == tenant_id)
        if for_update:
            statement = statement.with_for_update()
        row = (await self.connection.execute(statement)).first()
        return None if row is None else TenantRecord.model_validate(row._mapping)

    async def page(self, *, after: str | None, limit: int) -> list[TenantRecord]:
        """Tenants by id, at most `limit + 1` (the extra one says there is more)."""
        statement = select(tenants).order_by(tenants.c.id).limit(limit + 1)
        if after is not None:
            statement = statement.where(tenants.c.id > after)
        rows = (await self.connection.execute(statement)).all()
        return [TenantRecord.model_validate(row._mapping) for row in rows]

    async def create(
        self,
        tenant_id: str,
        name: str,
        *,
        at: datetime,
        enabled_tools: list[str] | None = None,
        status: str = "active",
    ) -> TenantRecord:
        values: dict[str, Any] = {
            "id": tenant_id,
            "name": name,
            "status": status,
            "quotas": {},
            "default_budget": {},
            "models": {},
            "visibility": {},
            "enabled_tools": enabled_tools,
            "created_at": at,
            "updated_at": at,
        }
        try:
            # The caller's transaction is lost with the error, which ends the unit of work.
            await self.connection.execute(insert(tenants).values(**values))
        except IntegrityError as exc:
            raise TenantExists(tenant_id) from exc
        return TenantRecord.model_validate(values)

    async def update(self, tenant_id: str, *, at: datetime, **changes: Any) -> TenantRecord:
        await self.connection.execute(
            update(tenants).where(tenants.c.id == tenant_id).values(**changes, updated_at=at)
        )
        record = await self.get(tenant_id)
        assert record is not None, "updated a tenant that does not exist"
        return record


@dataclass(frozen=True, slots=True)
class NetworkAllow:
    """A tenant's network allow-lists as `tenants.network_allow` keeps them: its own entries
    (`allow`, set by its admins: host names and public networks) and its platform allowance
    (`platform_allow`, set by platform admins: anything, loopback and private ranges
    included). A bare list is one stored before the two were told apart, unchecked: it counts
    as the tenant's own, and only its host names apply until an admin sets it again."""

    allow: tuple[str, ...] = ()
    platform_allow: tuple[str, ...] = ()
    unchecked: bool = False

    @classmethod
    def of(cls, document: Any) -> "NetworkAllow":
        if isinstance(document, list):
            return cls(tuple(map(str, document)), unchecked=True)
        if isinstance(document, dict):
            return cls(
                tuple(map(str, document.get("allow") or ())),
                tuple(map(str, document.get("platform_allow") or ())),
            )
        return cls()

    def document(self) -> dict[str, list[str]] | None:
        """What the column stores (None: nothing allowed)."""
        if not self.allow and not self.platform_allow:
            return None
        return {"allow": list(self.allow), "platform_allow": list(self.platform_allow)}

    @property
    def effective(self) -> list[str]:
        """The entries that apply: the tenant's (of an unchecked list, its host names) and
        the platform's."""
        own = [entry for entry in self.allow if not (self.unchecked and _numeric(entry))]
        return [*own, *self.platform_allow]


def _numeric(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return any(character.isdigit() for character in entry) and ":" in entry
    return True


async def network_allow(connection: AsyncConnection, tenant_id: str) -> list[str]:
    """The tenant's network allow-list as it applies (`NetworkAllow.effective`): hosts,
    networks and endpoints its outbound calls (web tools, MCP servers, remote agents,
    webhooks) may reach beyond the public internet."""
    statement = select(tenants.c.network_allow).where(tenants.c.id == tenant_id)
    return NetworkAllow.of((await connection.execute(statement)).scalar()).effective
