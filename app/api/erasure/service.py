"""Erasures on behalf of a caller: a task or conversation of the caller's tenant, its runs
stopped first."""

from collections.abc import Iterable
from uuid import UUID

from app.api.state import AppState
from app.api.tasks.service import find_task
from app.governance.callers import Caller
from app.governance.erasure import Erasure
from app.runs.errors import NotFound
from app.storage.conversations import ConversationRepository
from app.storage.erasure import TaskUnfinished
from app.storage.records import TaskRecord


def _erasure(state: AppState) -> Erasure:
    assert state.erasure is not None, "the lifespan builds the erasure"
    return state.erasure


async def erase_task(state: AppState, caller: Caller, task_id: UUID) -> None:
    """Stops the task's run if it has not ended, then erases it. A run whose instance does
    not end it in time (`TaskUnfinished`, 409) is left to that instance: erase again later."""
    task = await find_task(state, caller, task_id)
    await _stop(state, caller, [task])
    deleted = await _erasure(state).erase_task(caller.tenant_id, task.id, actor=caller.subject)
    if not deleted:  # erased by someone else meanwhile
        raise NotFound("task", task_id)
    if task.conversation_id is not None:  # its history must not bring the turn back
        state.runs.histories.forget(task.conversation_id)


async def erase_conversation(state: AppState, caller: Caller, conversation_id: UUID) -> None:
    """Stops the conversation's running turn, then erases it with all its turns."""
    async with state.database.read() as connection:
        repository = ConversationRepository(connection, caller.tenant_id)
        if await repository.get(conversation_id) is None:
            raise NotFound("conversation", conversation_id)
        turns = await repository.turns(conversation_id)
    await _stop(state, caller, turns)
    erased = await _erasure(state).erase_conversation(
        caller.tenant_id, conversation_id, actor=caller.subject
    )
    if erased is None:
        raise NotFound("conversation", conversation_id)
    state.runs.histories.forget(conversation_id)


async def _stop(state: AppState, caller: Caller, tasks: Iterable[TaskRecord]) -> None:
    for task in tasks:
        if task.is_finished:
            continue
        # Waits for the run's end to be stored: at most the runs' lease.
        ended = await state.runs.cancel(task, f"erased by {caller.subject}")
        if ended is None:
            raise TaskUnfinished(task.id, task.status)
