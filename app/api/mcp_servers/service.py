"""A tenant's MCP servers: each change stored with its audit row in one transaction; the server
then asked for its tools outside it (a remote server never holds a database transaction)."""

from typing import Any
from uuid import UUID

from app.api.errors import MCP_SERVER_EXISTS, UNAVAILABLE, ApiError
from app.api.mcp_servers.schemas import (
    McpServerCreate,
    McpServerList,
    McpServerOut,
    McpServerUpdate,
)
from app.api.outbound import check_header_secrets, header_document
from app.api.state import AppState
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.mcp import McpServers
from app.runs.errors import NotFound
from app.storage.mcp_servers import McpServerExists, McpServerRecord, McpServerRepository

_CONFIG = ("name", "url", "headers", "allowed_tools", "tool_roles")
# Changes that reach the server anew: its session is reopened and its tools listed again.
_REACHED_BY = frozenset({"url", "headers"})


def servers_of(state: AppState) -> McpServers:
    mcp = state.toolbox.mcp
    if mcp is None:
        raise ApiError(UNAVAILABLE, "this process offers no MCP servers")
    return mcp


async def list_servers(state: AppState, tenant: Tenant) -> McpServerList:
    async with state.database.read() as connection:
        records = await McpServerRepository(connection, tenant.id).all()
    return McpServerList(items=[McpServerOut.of(record) for record in records])


async def read_server(state: AppState, tenant: Tenant, server_id: UUID) -> McpServerOut:
    async with state.database.read() as connection:
        record = await McpServerRepository(connection, tenant.id).get(server_id)
    if record is None:
        raise _not_found(server_id)
    return McpServerOut.of(record)


async def create_server(
    state: AppState, caller: Caller, tenant: Tenant, body: McpServerCreate
) -> McpServerOut:
    """Stores the server, then asks it for its tools: the answer holds what it offered, or
    (`status: error`) why it could not be asked."""
    mcp = servers_of(state)
    headers = header_document(body.headers)
    await check_header_secrets(state.toolbox.secrets, tenant.id, headers)
    async with state.database.transaction() as connection:
        try:
            record = await McpServerRepository(connection, tenant.id).create(
                name=body.name,
                url=body.url,
                headers=headers,
                allowed_tools=body.allowed_tools,
                tool_roles=body.tool_roles,
                by=caller.subject,
                at=utc_now(),
            )
        except McpServerExists as exc:
            raise _exists(exc) from None
        await _audit(connection, caller, tenant, AuditAction.MCP_SERVER_CREATE, None, record)
    mcp.changed(tenant.id)
    return McpServerOut.of(await mcp.refresh(tenant.id, record.id) or record)


async def update_server(
    state: AppState, caller: Caller, tenant: Tenant, server_id: UUID, body: McpServerUpdate
) -> McpServerOut:
    """Changes the fields given; a new URL or new headers open a new session and list the
    server's tools again."""
    mcp = servers_of(state)
    changes = body.changes()
    if "headers" in changes:
        await check_header_secrets(state.toolbox.secrets, tenant.id, changes["headers"])
    async with state.database.transaction() as connection:
        servers = McpServerRepository(connection, tenant.id)
        before = await servers.get(server_id)
        if before is None:
            raise _not_found(server_id)
        changes = {name: value for name, value in changes.items() if getattr(before, name) != value}
        if not changes:
            return McpServerOut.of(before)
        try:
            record = await servers.update(server_id, changes, at=utc_now())
        except McpServerExists as exc:
            raise _exists(exc) from None
        assert record is not None
        await _audit(
            connection, caller, tenant, AuditAction.MCP_SERVER_UPDATE, before, record, set(changes)
        )
    mcp.changed(tenant.id)
    if _REACHED_BY & set(changes):
        record = await mcp.refresh(tenant.id, server_id) or record
    return McpServerOut.of(record)


async def delete_server(state: AppState, caller: Caller, tenant: Tenant, server_id: UUID) -> None:
    mcp = servers_of(state)
    async with state.database.transaction() as connection:
        servers = McpServerRepository(connection, tenant.id)
        before = await servers.get(server_id)
        if before is None or not await servers.delete(server_id):
            raise _not_found(server_id)
        await _audit(connection, caller, tenant, AuditAction.MCP_SERVER_DELETE, before, None)
    mcp.removed(tenant.id, server_id)


async def refresh_server(state: AppState, tenant: Tenant, server_id: UUID) -> McpServerOut:
    record = await servers_of(state).refresh(tenant.id, server_id)
    if record is None:
        raise _not_found(server_id)
    return McpServerOut.of(record)


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


def _not_found(server_id: UUID) -> NotFound:
    return NotFound("MCP server", str(server_id))


def _exists(exc: McpServerExists) -> ApiError:
    return ApiError(MCP_SERVER_EXISTS, f"{exc}; choose another name, or change that server instead")


_audit = ResourceAudit("mcp_server", audited)
