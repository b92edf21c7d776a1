"""Task operations on behalf of a caller, each within the caller's tenant."""

from uuid import UUID

from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.chain import ErrorCode, TaskState
from app.runs.errors import NotFound, TaskAlreadyFinished
from app.security import Principal
from app.storage.records import TaskRecord
from app.storage.tasks import TaskRepository


async def find_task(state: AppState, principal: Principal, task_id: UUID) -> TaskRecord:
    """The caller's task, on a short connection of its own (streams must not hold one)."""
    async with state.database.read() as connection:
        task = await TaskRepository(connection, principal.tenant_id).get(task_id)
    if task is None:
        raise NotFound("task", task_id)
    return task


async def cancel_task(state: AppState, principal: Principal, task_id: UUID) -> TaskRecord:
    """Stops the run and returns the task once its end is stored."""
    task = await find_task(state, principal, task_id)
    if task.is_finished:
        raise TaskAlreadyFinished(task.id, task.status)
    if not await state.runs.cancel(task.id, f"cancelled by {principal.subject}"):
        # No process runs it (its own is gone): end it here.
        await state.runs.end_unattended(
            task,
            status=TaskState.CANCELLED,
            error_code=ErrorCode.CANCELLED,
            message=f"cancelled by {principal.subject}",
        )
    return await find_task(state, principal, task_id)


MAX_SEQ = 2**31 - 1
"""Event ids and step numbers are 32-bit on every backend."""


def stream_position(last_event_id: str | None, after: int | None) -> int:
    """Where a subscriber resumes: `Last-Event-ID` (what a reconnecting EventSource sends)
    wins over `?after=`; 0 replays everything."""
    if last_event_id is not None and last_event_id.strip():
        value = last_event_id.strip()
        if not (value.isascii() and value.isdecimal() and int(value) <= MAX_SEQ):
            raise ApiError(
                VALIDATION,
                "Last-Event-ID must be an event id of this stream",
                errors=[FieldProblem(field="header.Last-Event-ID", message="not an event id")],
            )
        return int(value)
    return after or 0
