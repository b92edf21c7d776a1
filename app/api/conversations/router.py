"""/api/v1/conversations: start a conversation with an agent, list them, read one with its
turns. A turn is a task: `POST /api/v1/tasks` with `conversation_id`."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, status

from app.api.access import RequireTaskCreate, RequireTaskRead
from app.api.conversations.schemas import (
    ConversationCreate,
    ConversationDetail,
    ConversationOut,
    ConversationPage,
)
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.tasks.service import attached_files
from app.chain.models import utc_now
from app.runs.agents import resolve_agent
from app.runs.errors import NotFound
from app.storage.conversations import ConversationRepository
from app.storage.pagination import MAX_PAGE_SIZE, Cursor

router = APIRouter(prefix="/api/v1/conversations", tags=["conversations"], route_class=CheckedRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Start a conversation",
    responses=problems(401, 403, 409, 422),
)
async def create_conversation(
    body: ConversationCreate, caller: RequireTaskCreate, state: State
) -> ConversationOut:
    """Its turns are tasks submitted with its `conversation_id`; each run starts from every
    earlier turn (inputs, tool calls and results, answers), rebuilt from their chains. An
    unknown agent is 422, an archived one 409 `agent-archived`; `file_ids` naming no file of
    the tenant are 422."""
    files = await attached_files(
        state, caller.tenant_id, body.file_ids or [], reader=caller.subject
    )
    async with state.database.transaction() as connection:
        agent = await resolve_agent(connection, caller.tenant_id, body.agent)
        pinned = body.agent is not None and "@" in body.agent
        record = await ConversationRepository(connection, caller.tenant_id).create(
            user_id=caller.subject,
            agent_name=agent.name,
            agent_version=agent.version if pinned else None,
            metadata=body.metadata,
            file_ids=[attachment.file_id for attachment in files],
            at=utc_now(),
        )
    return ConversationOut.of(record)


@router.get("", summary="List conversations", responses=problems(401, 403, 422))
async def list_conversations(
    caller: RequireTaskRead,
    state: State,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ConversationPage:
    """The tenant's conversations, newest first."""
    async with state.database.read() as connection:
        page = await ConversationRepository(connection, caller.tenant_id).page(
            cursor=Cursor.decode(cursor) if cursor else None, limit=limit
        )
    return ConversationPage(
        items=[ConversationOut.of(item) for item in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/{conversation_id}",
    summary="Read a conversation with its turns",
    responses=problems(401, 403, 404, 422),
)
async def get_conversation(
    conversation_id: UUID, caller: RequireTaskRead, state: State
) -> ConversationDetail:
    """Its turns in order (task ids, inputs, answers, usage) and their totals."""
    async with state.database.read() as connection:
        repository = ConversationRepository(connection, caller.tenant_id)
        record = await repository.get(conversation_id)
        if record is None:
            raise NotFound("conversation", conversation_id)
        turns = await repository.turns(conversation_id)
    return ConversationDetail.with_turns(record, turns)
