"""Tasks, read and listed within one tenant."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Select, func, or_, select

from app.chain import TaskState
from app.storage.pagination import Cursor, Page
from app.storage.records import TaskRecord
from app.storage.repository import TenantScoped
from app.storage.tables import reasoning_chains, tasks


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which of the tenant's tasks a listing shows: one agent's (with those that name none,
    from before agents, where `unnamed`), in one conversation, in `states` (None: any;
    empty: none), whose status changed after `changed_after`."""

    agent: str
    unnamed: bool = False
    conversation_id: UUID | None = None
    states: tuple[TaskState, ...] | None = None
    changed_after: datetime | None = None


def status_changed_at() -> ColumnElement[Any]:
    """When a task's status last changed: its end, else its start, else its submission."""
    return func.coalesce(tasks.c.finished_at, tasks.c.started_at, tasks.c.created_at)


class TaskRepository(TenantScoped):
    def select(self) -> Select[Any]:
        """Tasks of the tenant with their chain's running totals (`usage`)."""
        return (
            select(tasks, reasoning_chains.c.metrics.label("usage"))
            .join(reasoning_chains, reasoning_chains.c.id == tasks.c.chain_id)
            .where(tasks.c.tenant_id == self.tenant_id)
        )

    async def get(self, task_id: UUID) -> TaskRecord | None:
        row = (await self.connection.execute(self.select().where(tasks.c.id == task_id))).first()
        return None if row is None else TaskRecord.model_validate(row._mapping)

    async def page(
        self,
        *,
        status: TaskState | None,
        cursor: Cursor | None,
        limit: int,
        agent: str | None = None,
        schedule_id: UUID | None = None,
    ) -> Page[TaskRecord]:
        statement = self.select()
        if schedule_id is not None:
            statement = statement.where(tasks.c.schedule_id == schedule_id)
        if status is not None:
            statement = statement.where(tasks.c.status == status)
        if agent is not None:
            statement = statement.where(tasks.c.agent_name == agent)
        return await self._page(statement, cursor, limit)

    async def counted_page(
        self, wanted: TaskFilter, *, cursor: Cursor | None, limit: int
    ) -> tuple[Page[TaskRecord], int]:
        """A page of the tasks `wanted` names, newest first, and how many there are in all."""
        named = tasks.c.agent_name == wanted.agent
        statement = self.select().where(
            or_(named, tasks.c.agent_name.is_(None)) if wanted.unnamed else named
        )
        if wanted.conversation_id is not None:
            statement = statement.where(tasks.c.conversation_id == wanted.conversation_id)
        if wanted.states is not None:
            statement = statement.where(tasks.c.status.in_(wanted.states))
        if wanted.changed_after is not None:
            statement = statement.where(status_changed_at() > wanted.changed_after)
        total = await self.connection.scalar(select(func.count()).select_from(statement.subquery()))
        return await self._page(statement, cursor, limit), int(total or 0)

    async def _page(
        self, statement: Select[Any], cursor: Cursor | None, limit: int
    ) -> Page[TaskRecord]:
        """`statement`'s tasks after `cursor`, newest first, at most `limit`."""
        if cursor is not None:
            statement = statement.where(cursor.before(tasks.c.created_at, tasks.c.id))
        statement = statement.order_by(tasks.c.created_at.desc(), tasks.c.id.desc())
        rows = (await self.connection.execute(statement.limit(limit + 1))).all()
        fetched = [TaskRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda task: Cursor(task.created_at, task.id))
