"""Chains: a task's chain, a chain with its steps, steps page by page, a tenant's chains."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from app.api.access import RequireChainExport, RequireChainRead, TenantForChainRead
from app.api.chains.schemas import (
    ChainOut,
    ChainPage,
    ChainSummary,
    StepPage,
    chain_json,
    steps_json,
)
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.query import Moment, aware
from app.api.services import Chains
from app.api.sse import MAX_SEQ
from app.chain import ChainStatus
from app.governance.audit import AuditAction
from app.storage.pagination import MAX_PAGE_SIZE

router = APIRouter(prefix="/api/v1", tags=["chains"], route_class=CheckedRoute)

MAX_STEPS_PAGE = 1000
_JSON = "application/json"


@router.get(
    "/tasks/{task_id}/chain",
    summary="A task's chain",
    response_model=ChainOut,
    responses=problems(401, 403, 404, 422),
)
async def get_task_chain(task_id: UUID, caller: RequireChainRead, chains: Chains) -> Response:
    """The chain as the caller may see it (see the chain route)."""
    return Response(chain_json(await chains.read(caller, task_id=task_id)), media_type=_JSON)


@router.get(
    "/chains/{chain_id}",
    summary="A chain with its steps",
    response_model=ChainOut,
    responses=problems(401, 403, 404, 422),
)
async def get_chain(chain_id: UUID, caller: RequireChainRead, chains: Chains) -> Response:
    """Every step in order, readable while the chain runs, as the caller may see it: without
    `chain:read_full`, `summary` steps carry only their summary, `hidden` steps are left out
    (step numbers then skip) and sensitive fields read `[REDACTED]`. Metrics are the true
    totals. Every read is audited."""
    return Response(chain_json(await chains.read(caller, chain_id=chain_id)), media_type=_JSON)


@router.get(
    "/chains/{chain_id}/export",
    summary="Export a chain",
    response_model=ChainOut,
    responses=problems(401, 403, 404, 422),
)
async def export_chain(chain_id: UUID, caller: RequireChainExport, chains: Chains) -> Response:
    """The chain as a JSON file to download, filtered like the chain route for the caller;
    audited as `chain.export`."""
    read = await chains.read(caller, chain_id=chain_id, action=AuditAction.CHAIN_EXPORT)
    body = chain_json(read)
    disposition = f'attachment; filename="chain-{chain_id}.json"'
    return Response(body, media_type=_JSON, headers={"Content-Disposition": disposition})


@router.get(
    "/chains/{chain_id}/steps",
    summary="A chain's steps, page by page",
    response_model=StepPage,
    responses=problems(401, 403, 404, 422),
)
async def get_chain_steps(
    chain_id: UUID,
    caller: RequireChainRead,
    chains: Chains,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="Steps after this step number.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_STEPS_PAGE)] = 100,
) -> Response:
    """Steps `after + 1 … after + limit`, filtered like the chain route (a page may hold
    fewer when some are hidden); `next_after` continues."""
    read = await chains.steps(caller, chain_id, after=after, limit=limit)
    return Response(steps_json(read), media_type=_JSON)


@router.get(
    "/tenants/{tenant_id}/chains",
    summary="A tenant's chains",
    responses=problems(401, 403, 404, 422),
)
async def list_tenant_chains(
    tenant: TenantForChainRead,
    chains: Chains,
    status: ChainStatus | None = None,
    agent: Annotated[
        str | None,
        Query(
            max_length=255,
            description="An agent: `name` (any of its versions) or `name@N` (that version).",
        ),
    ] = None,
    started_from: Annotated[Moment | None, Query(alias="from")] = None,
    started_to: Annotated[Moment | None, Query(alias="to")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ChainPage:
    """Newest first; `from` (inclusive) and `to` (exclusive) bound the start time. A platform
    admin may name any tenant."""
    page = await chains.page(
        tenant,
        status=status,
        agent=agent,
        started_from=aware(started_from),
        started_to=aware(started_to),
        cursor=cursor,
        limit=limit,
    )
    return ChainPage(
        items=[ChainSummary.of(chain) for chain in page.items], next_cursor=page.next_cursor
    )
