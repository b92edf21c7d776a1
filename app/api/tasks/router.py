"""/api/v1/tasks: submit, list, read, cancel, and follow a task's stream."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Header, Query, status
from fastapi.responses import JSONResponse, Response

from app.api.access import RequireChainRead, RequireTaskCancel, RequireTaskCreate, RequireTaskRead
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.sse import EVENT_STREAM, MAX_SEQ, EventStreamResponse, stream_position
from app.api.tasks.schemas import (
    IDEMPOTENCY_KEY_HEADER,
    IDEMPOTENCY_KEY_PATTERN,
    REPLAYED_HEADER,
    ForkRequest,
    ReplayRequest,
    TaskAccepted,
    TaskOut,
    TaskPage,
    stream_url,
)
from app.chain import TaskState
from app.runs import TaskSubmission
from app.runs.manager import SubmittedTask
from app.runs.models import AGENT_NAME_PATTERN
from app.runs.tasks import fork_task, replay_task
from app.storage.pagination import MAX_PAGE_SIZE, Cursor

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], route_class=CheckedRoute)

_STREAM_DOC = {
    "description": "The task's Server-Sent Events: `id:` is the event's sequence number.",
    "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
}


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TaskAccepted,
    summary="Submit a task",
    responses={200: _STREAM_DOC, **problems(401, 403, 404, 409, 422, 429)},
)
async def submit_task(
    submission: TaskSubmission,
    caller: RequireTaskCreate,
    state: State,
    accept: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY_HEADER,
            pattern=IDEMPOTENCY_KEY_PATTERN,
            description="Makes a retry safe: the same key with the same body (from the same "
            "caller, within 24 h) answers with the task the first submission made, with "
            f"`{REPLAYED_HEADER}: true`, and starts nothing; with another body it is refused "
            "(422 `idempotency-key-reused`). Visible ASCII, up to 255 characters.",
        ),
    ] = None,
) -> Response:
    """Starts the task and answers at once; with `Accept: text/event-stream` the answer is
    the task's stream itself (as the caller may see it). Tools the caller's roles may not use
    are refused (403), tools the tenant did not enable are unknown (422), a model the tenant
    did not approve is refused (422 `model-not-approved`); over the tenant's
    `submissions_per_minute` or `concurrent_runs` the answer is 429 with `Retry-After`.
    A repeat with an `Idempotency-Key` answers as the first did (202, or the stream from its
    start), naming the same task in its current state."""
    replayed = False
    if idempotency_key is None:
        submitted = await state.tasks.submit(caller, submission)
    else:
        submitted, replayed = await state.tasks.submit_once(caller, submission, idempotency_key)
    headers = {REPLAYED_HEADER: "true"} if replayed else {}
    if accept is not None and EVENT_STREAM in accept:
        headers["Location"] = f"/api/v1/tasks/{submitted.task_id}"
        events = await state.tasks.follow(caller, submitted.task_id, after=0)
        if events is None:  # never: a finished task has stored its events
            return _accepted(submitted, headers)
        return EventStreamResponse(events, headers=headers, closing=state.runs.draining)
    return _accepted(submitted, headers)


@router.get("", summary="List tasks", responses=problems(401, 403, 422))
async def list_tasks(
    caller: RequireTaskRead,
    state: State,
    status: TaskState | None = None,
    agent: Annotated[
        str | None,
        Query(pattern=AGENT_NAME_PATTERN, description="Only this agent's tasks (any version)."),
    ] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
    schedule_id: Annotated[
        UUID | None, Query(description="Only the tasks this schedule's firings made.")
    ] = None,
) -> TaskPage:
    """The caller's tenant's tasks, newest first."""
    page = await state.tasks.page(
        caller,
        status=status,
        agent=agent,
        schedule_id=schedule_id,
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
    )
    return TaskPage(items=[TaskOut.of(task) for task in page.items], next_cursor=page.next_cursor)


@router.get("/{task_id}", summary="Read a task", responses=problems(401, 403, 404, 422))
async def get_task(task_id: UUID, caller: RequireTaskRead, state: State) -> TaskOut:
    return TaskOut.of(await state.tasks.find(caller, task_id))


@router.post(
    "/{task_id}/cancel", summary="Cancel a task", responses=problems(401, 403, 404, 409, 422)
)
async def cancel(task_id: UUID, caller: RequireTaskCancel, state: State) -> TaskOut:
    """Stops the run, even mid-call; the chain ends `cancelled` with its steps and costs so
    far. Members cancel their own tasks, tenant admins any. A finished task answers 409."""
    return TaskOut.of(await state.tasks.cancel(caller, task_id))


@router.post(
    "/{task_id}/replay",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TaskAccepted,
    summary="Replay a task",
    responses=problems(401, 403, 404, 409, 422, 429),
)
async def replay(
    task_id: UUID,
    # Every field has a default, so no body at all is a replay with the defaults.
    request: Annotated[ReplayRequest, Body(default_factory=ReplayRequest)],
    caller: RequireTaskCreate,
    state: State,
) -> JSONResponse:
    """Starts a new task that runs the finished task again, every LLM and tool result taken
    from its chain: no model or tool is called and nothing is billed. Its `replay_report`
    says whether it reproduced the chain step for step, or where it first diverged and how
    (the task then ends `failed`, `replay_diverged`). The body is optional: without one,
    the task's own agent version replays it matching `requests`. An unfinished task
    answers 409."""
    submitted = await replay_task(
        state.tasks, caller, task_id, agent=request.agent, match=request.match
    )
    return _accepted(submitted)


@router.post(
    "/{task_id}/fork",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TaskAccepted,
    summary="Fork a task",
    responses=problems(401, 403, 404, 422, 429),
)
async def fork(
    task_id: UUID, request: ForkRequest, caller: RequireTaskCreate, state: State
) -> JSONResponse:
    """Starts a new task that takes the task's steps up to `from_step` as recorded (at no
    cost) and goes on live from there, with another agent version, model or input: what if
    that step had gone differently."""
    submitted = await fork_task(
        state.tasks,
        caller,
        task_id,
        from_step=request.from_step,
        agent=request.agent,
        model=request.model,
        input=request.input,
    )
    return _accepted(submitted)


def _accepted(submitted: SubmittedTask, headers: dict[str, str] | None = None) -> JSONResponse:
    """202 with the accepted task, `Location` naming it."""
    accepted = TaskAccepted(
        task_id=submitted.task_id,
        chain_id=submitted.chain_id,
        status=submitted.status,
        stream_url=stream_url(submitted.task_id),
    )
    return JSONResponse(
        accepted.model_dump(mode="json"),
        status_code=status.HTTP_202_ACCEPTED,
        headers={**(headers or {}), "Location": f"/api/v1/tasks/{submitted.task_id}"},
    )


@router.get(
    "/{task_id}/events",
    summary="Follow a task's stream",
    response_class=EventStreamResponse,
    responses={
        200: _STREAM_DOC,
        204: {"description": "The task has finished and the client has every event."},
        **problems(401, 403, 404, 422),
    },
)
async def task_events(
    task_id: UUID,
    caller: RequireChainRead,
    state: State,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="Resume after this event id.")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    sub_agents: Annotated[
        bool,
        Query(
            description="Whether the stream carries the events of the task's sub-agents "
            "(at every depth), each marked with its `depth` and `parent_step_id`."
        ),
    ] = True,
) -> Response:
    """Every event after `Last-Event-ID` (or `after`) from the store, then live ones, with no
    gap and no duplicate; the stream closes after `done`. Keep-alive comments while idle.
    The events of the task's sub-agents come among its own, in the order they happened:
    each is the event of the sub-agent's own stream (its `task_id` and `chain_id` are the
    sub-agent's) with its `depth` and `parent_step_id` (the call step one level up that
    started it); not their `done`, nor their `output_delta`s.
    Steps are sent as the caller may see them: without `chain:read_full`, `summary` steps as
    their summary, `hidden` ones not at all (ids keep their numbers, so resuming works) and
    sensitive fields redacted. A finished task with nothing after the given id answers 204.
    Without an `Authorization` header, a `?ticket=` from `POST …/stream-ticket` authenticates
    (a browser's `EventSource`, which cannot send one)."""
    position = stream_position(last_event_id, after)
    events = await state.tasks.follow(caller, task_id, after=position, sub_agents=sub_agents)
    if events is None:
        # Nothing more will ever come: 204 tells an EventSource to stop reconnecting.
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return EventStreamResponse(events, closing=state.runs.draining)
