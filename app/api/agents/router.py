"""/api/v1/agents: the agent definitions of the caller's tenant and their versions."""

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from app.api.access import RequireAgentConfigure, RequireTaskRead
from app.api.agents.schemas import AgentCreate, AgentOut, AgentPage, AgentUpdate
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.query import decode_int_cursor, decode_key_cursor
from app.api.services import Agents
from app.resources.agents import FROM_START, MAX_VERSION
from app.runs.models import AGENT_NAME_PATTERN
from app.storage.pagination import MAX_PAGE_SIZE, InvalidCursor

router = APIRouter(prefix="/api/v1/agents", tags=["agents"], route_class=CheckedRoute)


Version = Annotated[int, Path(ge=1, le=MAX_VERSION, description="A version number, from 1.")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Define an agent",
    responses=problems(401, 403, 409, 422),
)
async def post_agent(body: AgentCreate, caller: RequireAgentConfigure, agents: Agents) -> AgentOut:
    """Creates the agent at version 1. Its name is unique in the tenant, archived agents'
    included (409 `agent-exists`; `default` is the built-in agent's). A model that is not
    configured or not approved for the tenant, a tool that is not registered or not enabled
    for it, an unknown `kind` or a `response_format` that is not a JSON Schema are refused
    with 422 naming the field. Audited (`agent.create`)."""
    return AgentOut.of(await agents.create(caller, body.name, body.fields()))


@router.get("", summary="List agents", responses=problems(401, 403, 422))
async def get_agents(
    caller: RequireTaskRead,
    agents: Agents,
    archived: Annotated[bool, Query(description="Include archived agents.")] = False,
    cursor: str | None = None,
    limit: Limit = 50,
) -> AgentPage:
    """Newest versions, by name; the built-in `default` agent comes first on the first page."""
    after = _name_after(cursor) if cursor else None
    return AgentPage.of(await agents.page(caller, after=after, limit=limit, archived=archived))


@router.get("/{name}", summary="Read an agent", responses=problems(401, 403, 404, 422))
async def get_agent(name: str, caller: RequireTaskRead, agents: Agents) -> AgentOut:
    """Its newest version, archived or not."""
    return AgentOut.of(await agents.get(caller, name))


@router.patch(
    "/{name}",
    summary="Change an agent: a new version",
    responses=problems(401, 403, 404, 409, 422),
)
async def patch_agent(
    name: str, body: AgentUpdate, caller: RequireAgentConfigure, agents: Agents
) -> AgentOut:
    """Creates version n+1 from the newest version with the fields given (`null` resets one to
    its default), checked as on create, and answers it. Tasks naming the agent run it from
    now on; tasks naming `name@N` keep running version N. A change that leaves the definition
    as it is creates no version and answers the newest one. An archived agent cannot change
    (409 `agent-archived`), nor can the built-in `default` (409 `agent-builtin`). Audited
    (`agent.update`, with the changed fields before and after)."""
    return AgentOut.of(await agents.update(caller, name, body.applied_to))


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Archive an agent",
    responses=problems(401, 403, 404, 409, 422),
)
async def delete_agent(name: str, caller: RequireAgentConfigure, agents: Agents) -> Response:
    """New tasks naming it are refused with 409 `agent-archived`; its past tasks and versions
    stay readable, and its name stays taken. Archiving an archived agent changes nothing. The
    built-in `default` cannot be archived (409 `agent-builtin`). Audited (`agent.archive`)."""
    await agents.archive(caller, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{name}/versions",
    summary="An agent's versions",
    responses=problems(401, 403, 404, 422),
)
async def get_versions(
    name: str,
    caller: RequireTaskRead,
    agents: Agents,
    cursor: str | None = None,
    limit: Limit = 50,
) -> AgentPage:
    """Newest first."""
    after = decode_int_cursor(cursor) if cursor else None
    return AgentPage.of(await agents.versions(caller, name, after=after, limit=limit))


@router.get(
    "/{name}/versions/{version}",
    summary="Read one version of an agent",
    responses=problems(401, 403, 404, 422),
)
async def get_version(
    name: str, version: Version, caller: RequireTaskRead, agents: Agents
) -> AgentOut:
    return AgentOut.of(await agents.get(caller, name, version))


def _name_after(cursor: str) -> str:
    """The name a page's cursor starts after (`FROM_START`: before every name)."""
    name = decode_key_cursor(cursor)
    if name != FROM_START and re.fullmatch(AGENT_NAME_PATTERN, name) is None:
        raise InvalidCursor("the cursor is not one this service issued")
    return name
