"""A tenant's MCP servers on behalf of a caller: each change stored with its audit row in one
transaction; the server then asked for its tools outside it (a remote server never holds a
database transaction)."""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.audited import AuditedRows
from app.resources.mcp_servers.sessions import McpServers
from app.resources.mcp_servers.store import McpServerRecord, McpServerRepository
from app.resources.secrets.headers import check_headers
from app.resources.secrets.vault import SecretVault
from app.storage.database import Database

_CONFIG = ("name", "url", "headers", "allowed_tools", "tool_roles")
# Changes that reach the server anew: its session is reopened and its tools listed again.
_REACHED_BY = frozenset({"url", "headers"})


class McpServersUnavailable(OmniForgeError):
    """This process offers no MCP servers: none can be registered, changed or asked through
    it."""


@dataclass(frozen=True, slots=True)
class McpServerService:
    """A tenant's MCP servers. Changes need the process's `servers` (`McpServersUnavailable`
    without them), which then offer the tenant's runs the servers as they are now; headers
    naming a secret are checked against its value in the `vault`."""

    database: Database
    servers: McpServers | None
    vault: SecretVault | None

    @property
    def _rows(self) -> AuditedRows[McpServerRecord]:
        return AuditedRows(
            self.database,
            McpServerRepository,
            _audit,
            "MCP server",
            AuditAction.MCP_SERVER_UPDATE,
            AuditAction.MCP_SERVER_DELETE,
        )

    async def all(self, tenant: Tenant) -> list[McpServerRecord]:
        return await self._rows.all(tenant)

    async def get(self, tenant: Tenant, server_id: UUID) -> McpServerRecord:
        return await self._rows.get(tenant, server_id)

    async def create(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        name: str,
        url: str,
        headers: dict[str, Any],
        allowed_tools: list[str] | None,
        tool_roles: dict[str, list[str]],
    ) -> McpServerRecord:
        """Stores the server (`McpServerExists` if the tenant has one of that name), then
        asks it for its tools: the record holds what it offered, or (`status: error`) why it
        could not be asked. `headers` are as stored: text, or secrets by reference."""
        servers = self._servers()
        await check_headers(self.vault, tenant.id, headers)
        async with self.database.transaction() as connection:
            record = await McpServerRepository(connection, tenant.id).create(
                name=name,
                url=url,
                headers=headers,
                allowed_tools=allowed_tools,
                tool_roles=tool_roles,
                by=caller.subject,
                at=utc_now(),
            )
            await _audit(connection, caller, tenant, AuditAction.MCP_SERVER_CREATE, None, record)
        servers.changed(tenant.id)
        return await servers.refresh(tenant.id, record.id) or record

    async def update(
        self, caller: Caller, tenant: Tenant, server_id: UUID, changes: dict[str, Any]
    ) -> McpServerRecord:
        """Sets `changes` (columns: name, url, headers, allowed_tools, tool_roles); a new URL
        or new headers open a new session and list the server's tools again."""
        servers = self._servers()
        if "headers" in changes:
            await check_headers(self.vault, tenant.id, changes["headers"])
        record, changed = await self._rows.update(caller, tenant, server_id, changes)
        if not changed:
            return record
        servers.changed(tenant.id)
        if _REACHED_BY & set(changed):
            record = await servers.refresh(tenant.id, server_id) or record
        return record

    async def delete(self, caller: Caller, tenant: Tenant, server_id: UUID) -> None:
        servers = self._servers()
        await self._rows.delete(caller, tenant, server_id)
        servers.removed(tenant.id, server_id)

    async def refresh(self, tenant: Tenant, server_id: UUID) -> McpServerRecord:
        """Asks the server for its tools now, in a new session."""
        record = await self._servers().refresh(tenant.id, server_id)
        if record is None:
            raise self._rows.not_found(server_id)
        return record

    def _servers(self) -> McpServers:
        if self.servers is None:
            raise McpServersUnavailable("this process offers no MCP servers")
        return self.servers


def audited(record: McpServerRecord, fields: set[str] | None = None) -> dict[str, Any]:
    """A server's configuration as the audit log keeps it: headers' secret references as
    they are, their text values as `[text]` (a header may hold a credential)."""
    document: dict[str, Any] = {
        "name": record.name,
        "url": record.url,
        "headers": {
            name: value if isinstance(value, dict) else "[text]"
            for name, value in record.headers.items()
        },
        "allowed_tools": record.allowed_tools,
        "tool_roles": record.tool_roles,
    }
    return {name: document[name] for name in _CONFIG if fields is None or name in fields}


_audit = ResourceAudit("mcp_server", audited)
