"""/api/v1/tenants/{tenant_id}/remote-agents: a tenant's remote A2A agents, whose skills its
runs call as tools."""

from uuid import UUID

from fastapi import APIRouter, Response, status

from app.api.access import RequireToolConfigure, TenantForToolConfigure
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.outbound import header_document
from app.api.remote_agents.schemas import (
    RemoteAgentCreate,
    RemoteAgentList,
    RemoteAgentOut,
    RemoteAgentUpdate,
)
from app.api.services import RemoteAgentsOf

router = APIRouter(prefix="/api/v1/tenants", tags=["remote-agents"], route_class=CheckedRoute)


_ONE = "/{tenant_id}/remote-agents/{remote_agent_id}"


@router.post(
    "/{tenant_id}/remote-agents",
    status_code=status.HTTP_201_CREATED,
    summary="Register a remote A2A agent",
    responses=problems(401, 403, 404, 409, 422),
)
async def post_agent(
    body: RemoteAgentCreate,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    agents: RemoteAgentsOf,
) -> RemoteAgentOut:
    """Fetches the agent's card from `card_url` and registers the agent: each skill of the
    card becomes the tenant's tool `<name>__<skill>` (type `sub_agent`), which sends the
    model's message to the agent over A2A (JSON-RPC or HTTP+JSON, as its card offers),
    streams the remote task's updates into the chain as `tool_progress` events and answers
    with its result (and the usage and cost it reports through OmniForge's A2A extension).
    The card's address, and every address the agent is reached at, must pass the SSRF guard:
    private and loopback ones only where the tenant's (or the operator's) network allow-list
    admits them. A card that cannot be fetched or used is a 422 naming `card_url` (or
    `headers`, for a secret not set). The name is unique in the tenant, among its MCP
    servers too (409 `remote-agent-exists`). Audited (`remote_agent.create`; secret
    references, never values)."""
    record = await agents.create(
        caller,
        tenant,
        name=body.name,
        card_url=body.card_url,
        headers=header_document(body.headers),
        enabled=body.enabled,
    )
    return RemoteAgentOut.of(record)


@router.get(
    "/{tenant_id}/remote-agents",
    summary="List a tenant's remote A2A agents",
    responses=problems(401, 403, 404, 422),
)
async def get_agents(tenant: TenantForToolConfigure, agents: RemoteAgentsOf) -> RemoteAgentList:
    """By name, each with its card as last fetched and the tools its skills are."""
    return RemoteAgentList(items=[RemoteAgentOut.of(record) for record in await agents.all(tenant)])


@router.get(_ONE, summary="Read a remote A2A agent", responses=problems(401, 403, 404, 422))
async def get_agent(
    remote_agent_id: UUID, tenant: TenantForToolConfigure, agents: RemoteAgentsOf
) -> RemoteAgentOut:
    """Its card as last fetched, and the tools its skills are."""
    return RemoteAgentOut.of(await agents.get(tenant, remote_agent_id))


@router.patch(
    _ONE, summary="Change a remote A2A agent", responses=problems(401, 403, 404, 409, 422)
)
async def patch_agent(
    remote_agent_id: UUID,
    body: RemoteAgentUpdate,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    agents: RemoteAgentsOf,
) -> RemoteAgentOut:
    """Changes the fields given. `refresh: true`, or new `headers`, fetch its card again
    (nothing changes when that fails: 422); its tools become what the card lists now. A new
    `name` renames its tools; `enabled: false` stops offering them. Audited
    (`remote_agent.update`, with the changed fields before and after)."""
    record = await agents.update(
        caller, tenant, remote_agent_id, body.changes(), refetch=body.refetches
    )
    return RemoteAgentOut.of(record)


@router.delete(
    _ONE,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a remote A2A agent",
    responses=problems(401, 403, 404, 422),
)
async def delete_one(
    remote_agent_id: UUID,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    agents: RemoteAgentsOf,
) -> Response:
    """Its tools are no longer offered. Audited (`remote_agent.delete`)."""
    await agents.delete(caller, tenant, remote_agent_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
