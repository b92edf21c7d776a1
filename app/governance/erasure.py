"""Erasure at a caller's request: a finished task, or a conversation with every turn, deleted
at once with every row about it (audit events included, through the purge's deletion code),
leaving one audit event that says who erased which ids, with no content. The daily usage
roll-up stays, and the erased tasks' costs are kept as daily sums: the tenant's bill and cost
reports stay right."""

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.governance.deletions import DeletedRows
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.erasure import delete_tasks
from app.storage.retention import RetentionRepository
from app.storage.tables import conversations


class Erasure:
    def __init__(
        self,
        database: Database,
        deleted_rows: DeletedRows,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._database = database
        self._deleted_rows = deleted_rows
        self._clock = clock

    async def erase_task(self, tenant_id: str, task_id: UUID, *, actor: str) -> Counter[str]:
        """Erases the tenant's finished task with its replays and forks (they hold copies of
        its steps); raises `TaskUnfinished` if one has not ended. The rows deleted, per
        table: none when the tenant has no such task."""
        now = self._clock()
        async with self._database.transaction() as connection:
            erased = await RetentionRepository(connection, tenant_id).with_copies([task_id])
            deleted = await delete_tasks(connection, tenant_id, erased, at=now, with_audit=True)
            if not deleted["tasks"]:
                return deleted
            await self._audit(
                connection,
                tenant_id,
                now,
                actor=actor,
                action=AuditAction.TASK_ERASE,
                resource=("task", task_id),
                task_ids=erased,
                deleted=deleted,
            )
        self._deleted_rows.count(deleted, reason="erasure")
        return deleted

    async def erase_conversation(
        self, tenant_id: str, conversation_id: UUID, *, actor: str
    ) -> Counter[str] | None:
        """Erases the tenant's conversation and all its turns, in one transaction; raises
        `TaskUnfinished` if a turn has not ended (one may have started since its caller
        stopped them). The rows deleted, per table; None when the tenant has no such
        conversation."""
        now = self._clock()
        async with self._database.transaction() as connection:
            repository = RetentionRepository(connection, tenant_id)
            if not await repository.lock_conversation(conversation_id):
                return None
            turns = await repository.with_copies(await repository.turns([conversation_id]))
            deleted = await delete_tasks(connection, tenant_id, turns, at=now, with_audit=True)
            deleted[conversations.name] += await repository.delete_conversations([conversation_id])
            await self._audit(
                connection,
                tenant_id,
                now,
                actor=actor,
                action=AuditAction.CONVERSATION_ERASE,
                resource=("conversation", conversation_id),
                task_ids=turns,
                deleted=deleted,
            )
        self._deleted_rows.count(deleted, reason="erasure")
        return deleted

    @staticmethod
    async def _audit(
        connection: AsyncConnection,
        tenant_id: str,
        now: datetime,
        *,
        actor: str,
        action: AuditAction,
        resource: tuple[str, UUID],
        task_ids: Sequence[UUID],
        deleted: Counter[str],
    ) -> None:
        # `task_ids`, never `task_id`: an erasure's own event is not one "about" a task
        # that a later erasure would delete.
        details: dict[str, Any] = {
            "task_ids": [str(task_id) for task_id in task_ids],
            "deleted": dict(sorted(deleted.items())),
        }
        row = audit_row(
            actor=actor,
            action=action,
            resource_type=resource[0],
            resource_id=str(resource[1]),
            details=details,
            at=now,
        )
        await AuditRepository(connection, tenant_id).append([row])
