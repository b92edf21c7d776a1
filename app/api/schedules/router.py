"""/api/v1/schedules: tasks submitted on a cron schedule, and the tasks they made."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response, status

from app.api.access import RequireScheduleManage, RequireScheduleRead
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.schedules.schemas import ScheduleCreate, ScheduleOut, SchedulePage, ScheduleUpdate
from app.api.services import Schedules
from app.api.tasks.schemas import TaskOut, TaskPage
from app.storage.pagination import MAX_PAGE_SIZE

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"], route_class=CheckedRoute)

_ONE = "/{schedule_id}"
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Make a schedule",
    responses=problems(401, 403, 409, 422),
)
async def post_schedule(
    body: ScheduleCreate, caller: RequireScheduleManage, schedules: Schedules
) -> ScheduleOut:
    """Each firing submits `task` as the caller (its roles and API key as they are now), to
    the agent the task names, through the same checks as `POST /api/v1/tasks`: quotas,
    budgets and the model policy apply. The task is checked now (422 as a submission would
    be). A firing while the task of an earlier one still runs is skipped and counted. Every
    instance may fire schedules; each firing is made once. Audited (`schedule.create`)."""
    return ScheduleOut.of(await schedules.create(caller, body.schedule()))


@router.get("", summary="List schedules", responses=problems(401, 403, 422))
async def get_schedules(
    caller: RequireScheduleRead, schedules: Schedules, cursor: str | None = None, limit: Limit = 50
) -> SchedulePage:
    """The tenant's schedules, newest first, each with its next firing and its counts."""
    return SchedulePage.of(await schedules.page(caller, cursor, limit))


@router.get(_ONE, summary="Read a schedule", responses=problems(401, 403, 404, 422))
async def get_schedule(
    schedule_id: UUID, caller: RequireScheduleRead, schedules: Schedules
) -> ScheduleOut:
    return ScheduleOut.of(await schedules.read(caller, schedule_id))


@router.patch(_ONE, summary="Change a schedule", responses=problems(401, 403, 404, 409, 422))
async def patch_schedule(
    schedule_id: UUID, body: ScheduleUpdate, caller: RequireScheduleManage, schedules: Schedules
) -> ScheduleOut:
    """Changes the fields given; a new `cron` or `timezone` sets the next firing anew. It
    keeps running as its creator. Members change their own schedules, tenant admins any.
    Audited (`schedule.update`)."""
    return ScheduleOut.of(await schedules.update(caller, schedule_id, body.changes()))


@router.post(_ONE + "/pause", summary="Pause a schedule", responses=problems(401, 403, 404, 422))
async def pause(
    schedule_id: UUID, caller: RequireScheduleManage, schedules: Schedules
) -> ScheduleOut:
    """No firing until it is resumed."""
    return ScheduleOut.of(await schedules.pause(caller, schedule_id))


@router.post(
    _ONE + "/resume", summary="Resume a schedule", responses=problems(401, 403, 404, 409, 422)
)
async def resume(
    schedule_id: UUID, caller: RequireScheduleManage, schedules: Schedules
) -> ScheduleOut:
    """Fires again from the next moment its cron names; firings missed while it was paused
    are not made up for."""
    return ScheduleOut.of(await schedules.resume(caller, schedule_id))


@router.delete(
    _ONE,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a schedule",
    responses=problems(401, 403, 404, 422),
)
async def delete(
    schedule_id: UUID, caller: RequireScheduleManage, schedules: Schedules
) -> Response:
    """No more firings. The tasks it made stay, still tagged with its id. Audited
    (`schedule.delete`)."""
    await schedules.delete(caller, schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    _ONE + "/tasks",
    summary="The tasks a schedule made",
    responses=problems(401, 403, 404, 422),
)
async def get_schedule_tasks(
    schedule_id: UUID,
    caller: RequireScheduleRead,
    schedules: Schedules,
    cursor: str | None = None,
    limit: Limit = 50,
) -> TaskPage:
    """The tasks its firings made, newest first (skipped firings made none: see
    `skipped_count`)."""
    page = await schedules.tasks(caller, schedule_id, cursor, limit)
    return TaskPage(items=[TaskOut.of(task) for task in page.items], next_cursor=page.next_cursor)
