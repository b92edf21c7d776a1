"""Chains: a task's chain, a chain with its steps, steps page by page, a tenant's chains."""

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from app.api.chains.schemas import ChainOut, ChainPage, ChainSummary, StepPage, with_steps
from app.api.deps import CurrentPrincipal, ReadConnection
from app.api.errors import problems
from app.api.tasks.service import MAX_SEQ
from app.chain import ChainStatus
from app.runs.errors import NotFound
from app.security import Principal
from app.storage.chains import ChainRepository
from app.storage.pagination import MAX_PAGE_SIZE, Cursor
from app.storage.records import ChainRecord
from app.storage.tasks import TaskRepository

router = APIRouter(prefix="/api/v1", tags=["chains"])

MAX_STEPS_PAGE = 1000
_JSON = "application/json"


@router.get(
    "/tasks/{task_id}/chain",
    summary="A task's chain",
    response_model=ChainOut,
    responses=problems(401, 404, 422),
)
async def get_task_chain(
    task_id: UUID, principal: CurrentPrincipal, connection: ReadConnection
) -> Response:
    task = await TaskRepository(connection, principal.tenant_id).get(task_id)
    if task is None:
        raise NotFound("task", task_id)
    return await _chain_response(connection, principal, task.chain_id)


@router.get(
    "/chains/{chain_id}",
    summary="A chain with its steps",
    response_model=ChainOut,
    responses=problems(401, 404, 422),
)
async def get_chain(
    chain_id: UUID, principal: CurrentPrincipal, connection: ReadConnection
) -> Response:
    """Every step in order; readable while the chain runs."""
    return await _chain_response(connection, principal, chain_id)


@router.get(
    "/chains/{chain_id}/steps",
    summary="A chain's steps, page by page",
    response_model=StepPage,
    responses=problems(401, 404, 422),
)
async def get_chain_steps(
    chain_id: UUID,
    principal: CurrentPrincipal,
    connection: ReadConnection,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="Steps after this step number.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_STEPS_PAGE)] = 100,
) -> Response:
    chains = ChainRepository(connection, principal.tenant_id)
    await _find_chain(chains, chain_id)
    documents = await chains.step_documents(chain_id, after=after, limit=limit + 1)
    next_after = after + limit if len(documents) > limit else None
    tail = f',"next_after":{"null" if next_after is None else next_after}'
    body = f'{{"items":[{",".join(documents[:limit])}]{tail}}}'.encode()
    return Response(body, media_type=_JSON)


@router.get(
    "/tenants/{tenant_id}/chains",
    summary="A tenant's chains",
    responses=problems(401, 404, 422),
)
async def list_tenant_chains(
    tenant_id: str,
    principal: CurrentPrincipal,
    connection: ReadConnection,
    status: ChainStatus | None = None,
    agent: str | None = None,
    started_from: Annotated[datetime | None, Query(alias="from")] = None,
    started_to: Annotated[datetime | None, Query(alias="to")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ChainPage:
    """Newest first; `from` (inclusive) and `to` (exclusive) bound the start time."""
    if tenant_id != principal.tenant_id:
        raise NotFound("tenant", tenant_id)
    page = await ChainRepository(connection, principal.tenant_id).page(
        status=status,
        agent_id=agent,
        started_from=_aware(started_from),
        started_to=_aware(started_to),
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
    )
    return ChainPage(
        items=[ChainSummary.of(chain) for chain in page.items], next_cursor=page.next_cursor
    )


async def _find_chain(chains: ChainRepository, chain_id: UUID) -> ChainRecord:
    chain = await chains.get(chain_id)
    if chain is None:
        raise NotFound("chain", chain_id)
    return chain


async def _chain_response(
    connection: ReadConnection, principal: Principal, chain_id: UUID
) -> Response:
    chains = ChainRepository(connection, principal.tenant_id)
    chain = await _find_chain(chains, chain_id)
    documents = await chains.step_documents(chain_id)
    return Response(with_steps(ChainSummary.of(chain), "steps", documents), media_type=_JSON)


def _aware(moment: datetime | None) -> datetime | None:
    """Times without an offset are UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)
