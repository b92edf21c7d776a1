"""A tenant's remote A2A agents: where their cards are, how to reach them, and their cards as
last fetched."""

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.errors import OmniForgeError
from app.ids import uuid4
from app.storage.repository import TenantScoped
from app.storage.tables import mcp_servers, remote_agents


class RemoteAgentRecord(BaseModel):
    """A stored remote agent. `headers` map names to text or `{"secret": NAME}`; `card` is
    its agent card (A2A's JSON form) as fetched at `fetched_at`."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    name: str
    card_url: str
    headers: dict[str, Any]
    card: dict[str, Any]
    fetched_at: datetime
    enabled: bool
    created_by: str
    created_at: datetime
    updated_at: datetime


class RemoteAgentExists(OmniForgeError):
    def __init__(self, name: str, *, mcp_server: bool = False) -> None:
        what = "an MCP server" if mcp_server else "a remote agent"
        super().__init__(f"{what} named {name!r} already exists")
        self.name = name


class RemoteAgentRepository(TenantScoped):
    async def get(self, agent_id: UUID) -> RemoteAgentRecord | None:
        statement = select(remote_agents).where(
            remote_agents.c.tenant_id == self.tenant_id, remote_agents.c.id == agent_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else RemoteAgentRecord.model_validate(row._mapping)

    async def all(self) -> list[RemoteAgentRecord]:
        """The tenant's remote agents by name."""
        statement = (
            select(remote_agents)
            .where(remote_agents.c.tenant_id == self.tenant_id)
            .order_by(remote_agents.c.name)
        )
        rows = (await self.connection.execute(statement)).all()
        return [RemoteAgentRecord.model_validate(row._mapping) for row in rows]

    async def create(
        self,
        *,
        name: str,
        card_url: str,
        headers: dict[str, Any],
        card: dict[str, Any],
        enabled: bool,
        by: str,
        at: datetime,
    ) -> RemoteAgentRecord:
        """A new remote agent with the card just fetched (`RemoteAgentExists` if the name is
        taken, by another remote agent or by an MCP server, whose tools would take the same
        names)."""
        await self._refuse_mcp_name(name)
        agent_id = uuid4()
        try:
            await self.connection.execute(
                insert(remote_agents).values(
                    id=agent_id,
                    tenant_id=self.tenant_id,
                    name=name,
                    card_url=card_url,
                    headers=headers,
                    card=card,
                    fetched_at=at,
                    enabled=enabled,
                    created_by=by,
                    created_at=at,
                    updated_at=at,
                )
            )
        except IntegrityError as exc:
            raise RemoteAgentExists(name) from exc
        record = await self.get(agent_id)
        assert record is not None
        return record

    async def update(
        self, agent_id: UUID, changes: dict[str, Any], *, at: datetime
    ) -> RemoteAgentRecord | None:
        """The agent with `changes` (columns: name, headers, enabled, card, fetched_at); None
        if it is not the tenant's. `RemoteAgentExists` on a taken name."""
        if "name" in changes:
            await self._refuse_mcp_name(changes["name"])
        try:
            await self.connection.execute(
                update(remote_agents)
                .where(remote_agents.c.tenant_id == self.tenant_id, remote_agents.c.id == agent_id)
                .values(**changes, updated_at=at)
            )
        except IntegrityError as exc:
            raise RemoteAgentExists(str(changes.get("name"))) from exc
        return await self.get(agent_id)

    async def delete(self, agent_id: UUID) -> bool:
        result = await self.connection.execute(
            delete(remote_agents).where(
                remote_agents.c.tenant_id == self.tenant_id, remote_agents.c.id == agent_id
            )
        )
        return bool(result.rowcount)

    async def _refuse_mcp_name(self, name: str) -> None:
        statement = select(mcp_servers.c.id).where(
            mcp_servers.c.tenant_id == self.tenant_id, mcp_servers.c.name == name
        )
        if (await self.connection.execute(statement)).first() is not None:
            raise RemoteAgentExists(name, mcp_server=True)
