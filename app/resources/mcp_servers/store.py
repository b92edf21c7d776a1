"""A tenant's MCP servers: where they are, how to reach them, what they offered when last
asked and how they answered."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.errors import OmniForgeError
from app.ids import uuid4
from app.storage.repository import TenantScoped
from app.storage.tables import mcp_servers

McpStatus = Literal["ok", "error", "unknown"]


class McpServerRecord(BaseModel):
    """A stored MCP server. `headers` map names to text or `{"secret": NAME}`; `tools` are
    the tool documents its last discovery found; `status` how it answered last."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    name: str
    url: str
    headers: dict[str, Any]
    allowed_tools: list[str] | None
    tool_roles: dict[str, list[str]]
    tools: list[dict[str, Any]]
    status: McpStatus
    status_detail: str | None
    checked_at: datetime | None
    created_by: str
    created_at: datetime
    updated_at: datetime


class McpServerExists(OmniForgeError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an MCP server named {name!r} already exists")
        self.name = name


class McpServerRepository(TenantScoped):
    async def get(self, server_id: UUID) -> McpServerRecord | None:
        statement = select(mcp_servers).where(
            mcp_servers.c.tenant_id == self.tenant_id, mcp_servers.c.id == server_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else McpServerRecord.model_validate(row._mapping)

    async def all(self) -> list[McpServerRecord]:
        """The tenant's servers by name."""
        statement = (
            select(mcp_servers)
            .where(mcp_servers.c.tenant_id == self.tenant_id)
            .order_by(mcp_servers.c.name)
        )
        rows = (await self.connection.execute(statement)).all()
        return [McpServerRecord.model_validate(row._mapping) for row in rows]

    async def create(
        self,
        *,
        name: str,
        url: str,
        headers: dict[str, Any],
        allowed_tools: list[str] | None,
        tool_roles: dict[str, list[str]],
        by: str,
        at: datetime,
    ) -> McpServerRecord:
        """A new server, not yet asked for its tools (`McpServerExists` if the name is
        taken)."""
        server_id = uuid4()
        try:
            await self.connection.execute(
                insert(mcp_servers).values(
                    id=server_id,
                    tenant_id=self.tenant_id,
                    name=name,
                    url=url,
                    headers=headers,
                    allowed_tools=allowed_tools,
                    tool_roles=tool_roles,
                    tools=[],
                    status="unknown",
                    status_detail=None,
                    checked_at=None,
                    created_by=by,
                    created_at=at,
                    updated_at=at,
                )
            )
        except IntegrityError as exc:
            raise McpServerExists(name) from exc
        record = await self.get(server_id)
        assert record is not None
        return record

    async def update(
        self, server_id: UUID, changes: dict[str, Any], *, at: datetime
    ) -> McpServerRecord | None:
        """The server with `changes` (columns: name, url, headers, allowed_tools,
        tool_roles); None if it is not the tenant's. `McpServerExists` on a taken name."""
        try:
            await self._update(server_id, {**changes, "updated_at": at})
        except IntegrityError as exc:
            raise McpServerExists(str(changes.get("name"))) from exc
        return await self.get(server_id)

    async def record_discovery(
        self,
        server_id: UUID,
        *,
        tools: list[dict[str, Any]] | None,
        status: McpStatus,
        detail: str | None,
        at: datetime,
    ) -> None:
        """What asking the server for its tools found: `tools` (None: it did not answer, the
        tools found before stay) and how it answered."""
        values: dict[str, Any] = {"status": status, "status_detail": detail, "checked_at": at}
        if tools is not None:
            values["tools"] = tools
            values["updated_at"] = at
        await self._update(server_id, values)

    async def record_status(
        self, server_id: UUID, *, status: McpStatus, detail: str | None, at: datetime
    ) -> None:
        await self._update(server_id, {"status": status, "status_detail": detail, "checked_at": at})

    async def delete(self, server_id: UUID) -> bool:
        result = await self.connection.execute(
            delete(mcp_servers).where(
                mcp_servers.c.tenant_id == self.tenant_id, mcp_servers.c.id == server_id
            )
        )
        return bool(result.rowcount)

    async def _update(self, server_id: UUID, values: dict[str, Any]) -> None:
        await self.connection.execute(
            update(mcp_servers)
            .where(mcp_servers.c.tenant_id == self.tenant_id, mcp_servers.c.id == server_id)
            .values(**values)
        )
