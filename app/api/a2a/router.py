"""/a2a/v1: every agent of a tenant (the built-in `default` too, archived ones not) served
as an A2A v1.0 agent at `/a2a/v1/tenants/{tenant_id}/agents/{agent_name}`:

- `GET <base>/.well-known/agent-card.json`: its card;
- `POST <base>`: the JSON-RPC binding (`SendMessage`, `SendStreamingMessage`, `GetTask`,
  `ListTasks`, `CancelTask`, `SubscribeToTask`);
- the HTTP+JSON binding under it: `POST /message:send`, `POST /message:stream`,
  `GET /tasks`, `GET /tasks/{id}`, `POST /tasks/{id}:cancel`,
  `GET|POST /tasks/{id}:subscribe`.

The SDK's dispatchers parse and render each binding; `TaskHandler` does the work. Who may
call comes first, as on every route: a bearer token (401), the permission the operation
needs (403: sending `task:create`, reading and subscribing `task:read`, cancelling
`task:cancel`), the caller's own tenant and an agent of it (404), the input (422), all as
problem+json; after that, errors are A2A's, in the binding's format. Not in the OpenAPI
document: the card describes these routes, in A2A's terms."""

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.api.a2a.calls import CALL_KEY, A2ACall
from app.api.a2a.cards import A2A_PREFIX, AGENT_PATH, CARD_PATH, agent_card
from app.api.access import AnyCaller, RequireTaskCancel, RequireTaskCreate, RequireTaskRead
from app.api.deps import State
from app.api.inputs import CheckedRoute, check_inputs
from app.api.state import AppState
from app.governance.callers import Caller
from app.resources.agents import AgentArchived
from app.runs.agents import ResolvedAgent, UnknownAgent, resolve_agent
from app.runs.errors import Forbidden, NotFound
from app.security.rbac import Permission

if TYPE_CHECKING:
    from app.api.a2a.bindings import Bindings

router = APIRouter(
    prefix=A2A_PREFIX,
    tags=["a2a"],
    route_class=CheckedRoute,
    include_in_schema=False,
)


def _sdk() -> "Bindings":
    """The SDK's dispatchers and card rendering, imported by the first A2A request rather
    than at start-up (see `app.api.a2a.bindings`)."""
    from app.api.a2a.bindings import SDK

    return SDK


_JSONRPC_PERMISSIONS = {
    "SendMessage": Permission.TASK_CREATE,
    "SendStreamingMessage": Permission.TASK_CREATE,
    "GetTask": Permission.TASK_READ,
    "ListTasks": Permission.TASK_READ,
    "SubscribeToTask": Permission.TASK_READ,
    "CancelTask": Permission.TASK_CANCEL,
}


async def _enter(
    request: Request, state: AppState, caller: Caller, tenant_id: str, agent_name: str
) -> ResolvedAgent:
    """The agent the path names, of the caller's own tenant (any other tenant, an unknown
    or archived agent: 404); the request's `A2ACall` is left for the handler."""
    if tenant_id != caller.tenant_id:
        raise NotFound("tenant", tenant_id)
    if "@" in agent_name:  # an agent, not one of its versions: it runs its newest
        raise NotFound("agent", agent_name)
    try:
        async with state.database.read() as connection:
            agent = await resolve_agent(connection, caller.tenant_id, agent_name)
    except (UnknownAgent, AgentArchived):
        raise NotFound("agent", agent_name) from None
    request.scope[CALL_KEY] = A2ACall(state, caller, agent)
    return agent


async def _body_checked(request: Request) -> Any:
    """The JSON body, read once (the SDK reads it again from the cache) and checked as every
    route's is (422 problem+json)."""
    body = await request.json()
    check_inputs(request)
    return body


def _permitted(caller: Caller, permission: Permission) -> None:
    if permission not in caller.permissions:
        roles = ", ".join(sorted(caller.roles)) or "none"
        raise Forbidden(
            f"this needs the `{permission}` permission, which the caller's roles ({roles}) "
            "do not grant",
            permission=permission,
        )


@router.get(AGENT_PATH + CARD_PATH, summary="An agent's A2A card")
async def get_agent_card(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskRead, state: State
) -> JSONResponse:
    """Its name, description and version, both interfaces, streaming, the usage-and-resume
    extension, its tools as skills, and the bearer scheme."""
    agent = await _enter(request, state, caller, tenant_id, agent_name)
    registry = (await state.toolbox.for_tenant(caller.tenant)).registry
    card = agent_card(str(request.base_url), caller.tenant, agent, registry)
    return JSONResponse(_sdk().card_dict(card))


@router.post(AGENT_PATH, summary="A2A JSON-RPC")
async def jsonrpc(
    tenant_id: str, agent_name: str, request: Request, caller: AnyCaller, state: State
) -> Response:
    """One JSON-RPC 2.0 request; its `method` says which permission it needs."""
    body = await _body_checked(request)
    method = body.get("method") if isinstance(body, dict) else None
    permission = _JSONRPC_PERMISSIONS.get(method) if isinstance(method, str) else None
    if permission is not None:
        _permitted(caller, permission)
    await _enter(request, state, caller, tenant_id, agent_name)
    return await _sdk().jsonrpc.handle_requests(request)


@router.post(AGENT_PATH + "/message:send", summary="A2A SendMessage")
async def send_message(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskCreate, state: State
) -> Response:
    await _body_checked(request)
    await _enter(request, state, caller, tenant_id, agent_name)
    return await _sdk().rest.on_message_send(request)


@router.post(AGENT_PATH + "/message:stream", summary="A2A SendStreamingMessage")
async def send_streaming_message(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskCreate, state: State
) -> Response:
    await _body_checked(request)
    await _enter(request, state, caller, tenant_id, agent_name)
    response: Response = await _sdk().rest.on_message_send_stream(request)
    return response


@router.get(AGENT_PATH + "/tasks", summary="A2A ListTasks")
async def list_tasks(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskRead, state: State
) -> Response:
    await _enter(request, state, caller, tenant_id, agent_name)
    return await _sdk().rest.list_tasks(request)


@router.api_route(
    AGENT_PATH + "/tasks/{id}:subscribe", methods=["GET", "POST"], summary="A2A SubscribeToTask"
)
async def subscribe_to_task(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskRead, state: State
) -> Response:
    await _enter(request, state, caller, tenant_id, agent_name)
    response: Response = await _sdk().rest.on_subscribe_to_task(request)
    return response


@router.post(AGENT_PATH + "/tasks/{id}:cancel", summary="A2A CancelTask")
async def cancel_task(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskCancel, state: State
) -> Response:
    await _enter(request, state, caller, tenant_id, agent_name)
    return await _sdk().rest.on_cancel_task(request)


# After `:subscribe`, which this path would match too.
@router.get(AGENT_PATH + "/tasks/{id}", summary="A2A GetTask")
async def get_task(
    tenant_id: str, agent_name: str, request: Request, caller: RequireTaskRead, state: State
) -> Response:
    await _enter(request, state, caller, tenant_id, agent_name)
    return await _sdk().rest.on_get_task(request)
