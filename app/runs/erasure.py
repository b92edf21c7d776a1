"""Erasure on behalf of a caller: a task or conversation of the caller's tenant, its runs
stopped first, then erased at once (`app.governance.erasure`)."""

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from app.governance.callers import Caller
from app.governance.erasure import Erasure
from app.resources.conversations.store import ConversationRepository
from app.runs.errors import NotFound
from app.runs.manager import RunManager
from app.storage.database import Database
from app.storage.erasure import TaskUnfinished
from app.storage.records import TaskRecord


@dataclass(frozen=True, slots=True)
class ErasureService:
    """Erases through `erasure` once `runs` has ended the runs of what is erased, and has
    `runs` forget the erased conversations' histories. A run whose instance does not end it
    in time (`TaskUnfinished`) is left to that instance: erase again later."""

    database: Database
    erasure: Erasure
    runs: RunManager

    async def erase_task(self, caller: Caller, task: TaskRecord) -> None:
        """Stops the task's run if it has not ended, then erases it."""
        await self._stop(caller, [task])
        deleted = await self.erasure.erase_task(caller.tenant_id, task.id, actor=caller.subject)
        if not deleted:  # erased by someone else meanwhile
            raise NotFound("task", task.id)
        if task.conversation_id is not None:  # its history must not bring the turn back
            self.runs.histories.forget(task.conversation_id)

    async def erase_conversation(self, caller: Caller, conversation_id: UUID) -> None:
        """Stops the conversation's running turn, then erases it with all its turns."""
        async with self.database.read() as connection:
            repository = ConversationRepository(connection, caller.tenant_id)
            if await repository.get(conversation_id) is None:
                raise NotFound("conversation", conversation_id)
            turns = await repository.turns(conversation_id)
        await self._stop(caller, turns)
        erased = await self.erasure.erase_conversation(
            caller.tenant_id, conversation_id, actor=caller.subject
        )
        if erased is None:
            raise NotFound("conversation", conversation_id)
        self.runs.histories.forget(conversation_id)

    async def _stop(self, caller: Caller, tasks: Iterable[TaskRecord]) -> None:
        for task in tasks:
            if task.is_finished:
                continue
            # Waits for the run's end to be stored: at most the runs' lease.
            ended = await self.runs.cancel(task, f"erased by {caller.subject}")
            if ended is None:
                raise TaskUnfinished(task.id, task.status)
