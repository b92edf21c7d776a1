"""`DELETE /api/v1/tasks/{id}` and `DELETE /api/v1/conversations/{id}`: erasure of content at
once, at the tenant's request."""

from uuid import UUID

from fastapi import APIRouter, Response, status

from app.api.access import RequireTaskDelete
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.services import Erasures

router = APIRouter(tags=["erasure"], route_class=CheckedRoute)


_ERASES = (
    "Its chain, steps, events, approvals, todo list, webhook deliveries and the audit events "
    "about it go at once; one audit event (`{action}`) keeps who erased which ids, with no "
    "content. The daily usage roll-up stays and its costs are kept as daily sums, so the "
    "tenant's bill and cost reports stay right. Files given to it are the tenant's own and "
    "stay (`DELETE /api/v1/files/{{id}}`)."
)


@router.delete(
    "/api/v1/tasks/{task_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Erase a task",
    responses=problems(401, 403, 404, 409, 422),
    description="A task that has not ended is cancelled first (its run stopped, even "
    "mid-call, or taken from the queue). "
    + _ERASES.format(action="task.erase")
    + " 409 `task-unfinished` when its run's instance does not end it in time (it stopped "
    "responding): erase again once it has. Needs `task:delete` (tenant admins).",
)
async def delete_task(
    task_id: UUID, caller: RequireTaskDelete, state: State, erasure: Erasures
) -> None:
    await erasure.erase_task(caller, await state.tasks.find(caller, task_id))


@router.delete(
    "/api/v1/conversations/{conversation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Erase a conversation with all its turns",
    responses=problems(401, 403, 404, 409, 422),
    description="Its running turn is cancelled first; then the conversation and every turn "
    "(a task each) go in one transaction. "
    + _ERASES.format(action="conversation.erase")
    + " 409 `task-unfinished` when a turn's run is not ended in time, or a turn was added "
    "while it was being erased. Needs `task:delete` (tenant admins).",
)
async def delete_conversation(
    conversation_id: UUID, caller: RequireTaskDelete, erasure: Erasures
) -> None:
    await erasure.erase_conversation(caller, conversation_id)
