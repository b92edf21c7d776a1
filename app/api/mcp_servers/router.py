"""/api/v1/tenants/{tenant_id}/mcp-servers: a tenant's remote MCP servers and their status."""

from uuid import UUID

from fastapi import APIRouter, Response, status

from app.api.access import RequireToolConfigure, TenantForToolConfigure
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.mcp_servers.schemas import (
    McpServerCreate,
    McpServerList,
    McpServerOut,
    McpServerUpdate,
)
from app.api.outbound import header_document
from app.api.services import McpServers

router = APIRouter(prefix="/api/v1/tenants", tags=["mcp-servers"], route_class=CheckedRoute)


_ONE = "/{tenant_id}/mcp-servers/{server_id}"


@router.post(
    "/{tenant_id}/mcp-servers",
    status_code=status.HTTP_201_CREATED,
    summary="Register an MCP server",
    responses=problems(401, 403, 404, 409, 422),
)
async def post_server(
    body: McpServerCreate,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    servers: McpServers,
) -> McpServerOut:
    """Registers a remote MCP server (streamable HTTP) and asks it for its tools at once: they
    become the tenant's tools `<name>__<tool>`, usable by its agents and tasks. A server that
    cannot be asked is registered all the same, with `status: error` and why. Its address
    must pass the SSRF guard: private and loopback ones only where the tenant's (or the
    operator's) network allow-list admits them. The name is unique in the tenant (409
    `mcp-server-exists`). Audited (`mcp_server.create`; secret references, never values)."""
    record = await servers.create(
        caller,
        tenant,
        name=body.name,
        url=body.url,
        headers=header_document(body.headers),
        allowed_tools=body.allowed_tools,
        tool_roles=body.tool_roles,
    )
    return McpServerOut.of(record)


@router.get(
    "/{tenant_id}/mcp-servers",
    summary="List a tenant's MCP servers",
    responses=problems(401, 403, 404, 422),
)
async def get_servers(tenant: TenantForToolConfigure, servers: McpServers) -> McpServerList:
    """By name, each with its status and the tools it offered when last asked."""
    return McpServerList(items=[McpServerOut.of(record) for record in await servers.all(tenant)])


@router.get(_ONE, summary="Read an MCP server", responses=problems(401, 403, 404, 422))
async def get_server(
    server_id: UUID, tenant: TenantForToolConfigure, servers: McpServers
) -> McpServerOut:
    """Its status (`ok`, `error` with why, `unknown` before it was first asked), when it was
    last established, and its tools with their JSON Schemas."""
    return McpServerOut.of(await servers.get(tenant, server_id))


@router.patch(_ONE, summary="Change an MCP server", responses=problems(401, 403, 404, 409, 422))
async def patch_server(
    server_id: UUID,
    body: McpServerUpdate,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    servers: McpServers,
) -> McpServerOut:
    """Changes the fields given. A new `url` or new `headers` open a new session and ask the
    server for its tools again; a new `name` renames its tools. Audited
    (`mcp_server.update`, with the changed fields before and after)."""
    return McpServerOut.of(await servers.update(caller, tenant, server_id, body.changes()))


@router.delete(
    _ONE,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove an MCP server",
    responses=problems(401, 403, 404, 422),
)
async def delete_one(
    server_id: UUID,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    servers: McpServers,
) -> Response:
    """Its tools are no longer offered and its session is closed. Audited
    (`mcp_server.delete`)."""
    await servers.delete(caller, tenant, server_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    _ONE + "/refresh",
    summary="Ask an MCP server for its tools now",
    responses=problems(401, 403, 404, 422),
)
async def post_refresh(
    server_id: UUID, tenant: TenantForToolConfigure, servers: McpServers
) -> McpServerOut:
    """Opens a new session (its headers' secrets resolved anew: do this after changing one),
    lists the server's tools and stores what it offers, or why it could not be asked. Servers
    that announce changes to their tools (`notifications/tools/list_changed`) are asked
    again on their own."""
    return McpServerOut.of(await servers.refresh(tenant, server_id))
