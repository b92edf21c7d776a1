"""Tasks, read and listed within one tenant."""

from typing import Any
from uuid import UUID

from sqlalchemy import Select, select

from app.chain import TaskState
from app.storage.pagination import Cursor, Page
from app.storage.records import TaskRecord
from app.storage.repository import TenantScoped
from app.storage.tables import reasoning_chains, tasks


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
        if cursor is not None:
            statement = statement.where(cursor.before(tasks.c.created_at, tasks.c.id))
        statement = statement.order_by(tasks.c.created_at.desc(), tasks.c.id.desc())
        rows = (await self.connection.execute(statement.limit(limit + 1))).all()
        fetched = [TaskRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda task: Cursor(task.created_at, task.id))
