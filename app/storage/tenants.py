"""Tenants: the rows every other table's `tenant_id` names. Not tenant-scoped themselves:
who may see which tenant is decided above, by the caller's roles."""

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.errors import OmniForgeError
from app.storage.records import NetworkAllow, TenantRecord
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


async def network_allow(connection: AsyncConnection, tenant_id: str) -> list[str]:
    """The tenant's network allow-list as it applies (`NetworkAllow.effective`): hosts,
    networks and endpoints its outbound calls (web tools, MCP servers, remote agents,
    webhooks) may reach beyond the public internet."""
    statement = select(tenants.c.network_allow).where(tenants.c.id == tenant_id)
    return NetworkAllow.of((await connection.execute(statement)).scalar()).effective
