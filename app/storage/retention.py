"""What the retention purge deletes of one tenant, found a batch at a time: finished tasks,
idle conversations (with their turns) and files past the tenant's retention."""

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from sqlalchemy import delete, exists, or_, select

from app.storage.erasure import FINISHED
from app.storage.files import FileRepository
from app.storage.records import FileRecord
from app.storage.repository import TenantScoped
from app.storage.tables import conversations, files, tasks


class RetentionRepository(TenantScoped):
    async def expired_tasks(self, cutoff: datetime, *, limit: int) -> list[UUID]:
        """Up to `limit` tasks that finished before `cutoff` and are no turn of a
        conversation (those go with their conversation), the oldest first."""
        t = tasks.c
        statement = (
            select(t.id)
            .where(
                t.tenant_id == self.tenant_id,
                t.finished_at < cutoff,
                t.status.in_(FINISHED),
                or_(
                    t.conversation_id.is_(None),
                    ~exists().where(conversations.c.id == t.conversation_id),
                ),
            )
            .order_by(t.finished_at)
            .limit(limit)
        )
        return list((await self.connection.execute(statement)).scalars())

    async def expired_conversations(self, cutoff: datetime, *, limit: int) -> list[UUID]:
        """Up to `limit` conversations last active before `cutoff`: no turn added since, and
        every turn finished before it."""
        c, t = conversations.c, tasks.c
        active_turn = exists().where(
            t.tenant_id == self.tenant_id,
            t.conversation_id == c.id,
            or_(t.status.not_in(FINISHED), t.finished_at >= cutoff),
        )
        statement = (
            select(c.id)
            .where(c.tenant_id == self.tenant_id, c.updated_at < cutoff, ~active_turn)
            .order_by(c.updated_at)
            .limit(limit)
        )
        return list((await self.connection.execute(statement)).scalars())

    async def turns(self, conversation_ids: Sequence[UUID]) -> list[UUID]:
        """The tasks that are turns of these conversations."""
        t = tasks.c
        statement = select(t.id).where(
            t.tenant_id == self.tenant_id, t.conversation_id.in_(conversation_ids)
        )
        return list((await self.connection.execute(statement)).scalars())

    async def with_copies(self, task_ids: Sequence[UUID]) -> list[UUID]:
        """`task_ids` and every task that copies steps of one of them (replays and forks, and
        theirs in turn): erasing a task's content erases its copies too."""
        t = tasks.c
        found = list(dict.fromkeys(task_ids))
        frontier = found
        while frontier:
            statement = select(t.id).where(
                t.tenant_id == self.tenant_id,
                or_(t.replayed_from.in_(frontier), t.forked_from.in_(frontier)),
            )
            frontier = [
                task_id
                for task_id in (await self.connection.execute(statement)).scalars()
                if task_id not in found
            ]
            found.extend(frontier)
        return found

    async def delete_conversations(self, conversation_ids: Sequence[UUID]) -> int:
        """Deletes the conversations' own rows (their turns are deleted as tasks)."""
        c = conversations.c
        result = await self.connection.execute(
            delete(conversations).where(c.tenant_id == self.tenant_id, c.id.in_(conversation_ids))
        )
        return result.rowcount

    async def expired_files(self, cutoff: datetime, *, limit: int) -> list[UUID]:
        """Up to `limit` files uploaded before `cutoff`, the oldest first, but those given to
        a task that has not ended (its run may still read them)."""
        t, f = tasks.c, files.c
        in_use: set[str] = set()
        given = select(t.file_ids).where(t.tenant_id == self.tenant_id, t.status.not_in(FINISHED))
        for file_ids in (await self.connection.execute(given)).scalars():
            in_use.update(str(file_id) for file_id in file_ids or ())
        statement = (
            select(f.id)
            .where(f.tenant_id == self.tenant_id, f.created_at < cutoff)
            .order_by(f.created_at, f.id)
            .limit(limit + len(in_use))
        )
        found: list[UUID] = []
        for file_id in (await self.connection.execute(statement)).scalars():
            if str(file_id) not in in_use:
                found.append(file_id)
                if len(found) == limit:
                    break
        return found

    async def delete_files(self, file_ids: Sequence[UUID]) -> list[FileRecord]:
        """Deletes the files' rows and text; their bytes are the caller's to delete once
        this commits."""
        repository = FileRepository(self.connection, self.tenant_id)
        deleted = [await repository.delete(file_id) for file_id in file_ids]
        return [record for record in deleted if record is not None]

    async def lock_conversation(self, conversation_id: UUID) -> bool:
        """Whether the tenant has the conversation, locked (on Postgres) until the caller's
        transaction ends: no turn is added to it meanwhile (adding one updates its row)."""
        c = conversations.c
        statement = (
            select(c.id)
            .where(c.tenant_id == self.tenant_id, c.id == conversation_id)
            .with_for_update()
        )
        return (await self.connection.execute(statement)).first() is not None
