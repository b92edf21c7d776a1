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
from app.api.services import Conversations
from app.storage.pagination import MAX_PAGE_SIZE, Cursor

router = APIRouter(prefix="/api/v1/conversations", tags=["conversations"], route_class=CheckedRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Start a conversation",
    responses=problems(401, 403, 409, 422),
)
async def create_conversation(
    body: ConversationCreate,
    caller: RequireTaskCreate,
    state: State,
    conversations: Conversations,
) -> ConversationOut:
    """Its turns are tasks submitted with its `conversation_id`; each run starts from every
    earlier turn (inputs, tool calls and results, answers), rebuilt from their chains. An
    unknown agent is 422, an archived one 409 `agent-archived`; `file_ids` naming no file of
    the tenant are 422."""
    files = await state.tasks.inputs.files(
        caller.tenant_id, body.file_ids or [], reader=caller.subject
    )
    record = await conversations.start(
        caller,
        agent=body.agent,
        metadata=body.metadata,
        file_ids=[attachment.file_id for attachment in files],
    )
    return ConversationOut.of(record)


@router.get("", summary="List conversations", responses=problems(401, 403, 422))
async def list_conversations(
    caller: RequireTaskRead,
    conversations: Conversations,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ConversationPage:
    """The tenant's conversations, newest first."""
    after = Cursor.decode(cursor) if cursor else None
    page = await conversations.page(caller, cursor=after, limit=limit)
    return ConversationPage(
        items=[ConversationOut.of(item) for item in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/{conversation_id}",
    summary="Read a conversation with its turns",
    responses=problems(401, 403, 404, 422),
)
async def get_conversation(
    conversation_id: UUID, caller: RequireTaskRead, conversations: Conversations
) -> ConversationDetail:
    """Its turns in order (task ids, inputs, answers, usage) and their totals."""
    record, turns = await conversations.with_turns(caller, conversation_id)
    return ConversationDetail.with_turns(record, turns)
