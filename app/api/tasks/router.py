"""/api/v1/tasks: submit, list, read, cancel, and follow a task's stream."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Header, Query, status
from fastapi.responses import JSONResponse, Response

from app.api.deps import CurrentPrincipal, ReadConnection, State
from app.api.errors import problems
from app.api.sse import EVENT_STREAM, EventStreamResponse
from app.api.tasks.schemas import TaskAccepted, TaskOut, TaskPage, stream_url
from app.api.tasks.service import MAX_SEQ, cancel_task, find_task, stream_position
from app.chain import TaskState
from app.runs import TaskSubmission
from app.runs.streams import task_stream
from app.storage.pagination import MAX_PAGE_SIZE, Cursor
from app.storage.tasks import TaskRepository

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])

_STREAM_DOC = {
    "description": "The task's Server-Sent Events: `id:` is the event's sequence number.",
    "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
}


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TaskAccepted,
    summary="Submit a task",
    responses={200: _STREAM_DOC, **problems(401, 422)},
)
async def submit_task(
    submission: TaskSubmission,
    principal: CurrentPrincipal,
    state: State,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Starts the task and answers at once; with `Accept: text/event-stream` the answer is
    the task's stream itself."""
    submitted = await state.runs.submit(principal, submission)
    location = {"Location": f"/api/v1/tasks/{submitted.task_id}"}
    if accept is not None and EVENT_STREAM in accept:
        events = task_stream(
            state.runs,
            state.run_log,
            submitted.task_id,
            principal.tenant_id,
            submitted.chain_id,
            after=0,
            keepalive_s=state.settings.sse_keepalive_s,
        )
        return EventStreamResponse(events, headers=location)
    accepted = TaskAccepted(
        task_id=submitted.task_id,
        chain_id=submitted.chain_id,
        status=submitted.status,
        stream_url=stream_url(submitted.task_id),
    )
    return JSONResponse(
        accepted.model_dump(mode="json"), status_code=status.HTTP_202_ACCEPTED, headers=location
    )


@router.get("", summary="List tasks", responses=problems(401, 422))
async def list_tasks(
    principal: CurrentPrincipal,
    connection: ReadConnection,
    status: TaskState | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> TaskPage:
    """The caller's tenant's tasks, newest first."""
    page = await TaskRepository(connection, principal.tenant_id).page(
        status=status, cursor=Cursor.decode(cursor) if cursor else None, limit=limit
    )
    return TaskPage(items=[TaskOut.of(task) for task in page.items], next_cursor=page.next_cursor)


@router.get("/{task_id}", summary="Read a task", responses=problems(401, 404, 422))
async def get_task(task_id: UUID, principal: CurrentPrincipal, state: State) -> TaskOut:
    return TaskOut.of(await find_task(state, principal, task_id))


@router.post("/{task_id}/cancel", summary="Cancel a task", responses=problems(401, 404, 409, 422))
async def cancel(task_id: UUID, principal: CurrentPrincipal, state: State) -> TaskOut:
    """Stops the run, even mid-call; the chain ends `cancelled` with its steps and costs so
    far. A finished task answers 409."""
    return TaskOut.of(await cancel_task(state, principal, task_id))


@router.get(
    "/{task_id}/events",
    summary="Follow a task's stream",
    response_class=EventStreamResponse,
    responses={
        200: _STREAM_DOC,
        204: {"description": "The task has finished and the client has every event."},
        **problems(401, 404, 422),
    },
)
async def task_events(
    task_id: UUID,
    principal: CurrentPrincipal,
    state: State,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="Resume after this event id.")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """Every event after `Last-Event-ID` (or `after`) from the store, then live ones, with no
    gap and no duplicate; the stream closes after `done`. Keep-alive comments while idle.
    A finished task with nothing after the given id answers 204."""
    task = await find_task(state, principal, task_id)
    position = stream_position(last_event_id, after)
    if task.is_finished and position >= task.last_seq:
        # Nothing more will ever come: 204 tells an EventSource to stop reconnecting.
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    events = task_stream(
        state.runs,
        state.run_log,
        task.id,
        task.tenant_id,
        task.chain_id,
        after=position,
        keepalive_s=state.settings.sse_keepalive_s,
    )
    return EventStreamResponse(events)
