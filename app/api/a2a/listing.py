"""`ListTasks`: one agent's tasks of the caller's tenant, newest first, filtered as A2A asks
(by context, that is conversation; by state; by when their status last changed), with the
total A2A wants besides the page.

Every statement starts from `TaskRepository.select()`, the tenant-scoped base of task reads.
(`TaskRepository.page` has neither a conversation filter nor a count; this belongs there.)"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Select, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import TaskState
from app.runs.agents import DEFAULT_AGENT
from app.storage.pagination import Cursor, Page
from app.storage.records import TaskRecord
from app.storage.tables import tasks
from app.storage.tasks import TaskRepository


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which of the tenant's tasks a listing shows. `states` None: any; empty: none."""

    agent: str
    conversation_id: UUID | None = None
    states: tuple[TaskState, ...] | None = None
    changed_after: datetime | None = None


def _status_changed_at() -> ColumnElement[Any]:
    # When its A2A status last changed, as `mapping.task_status` stamps it.
    return func.coalesce(tasks.c.finished_at, tasks.c.started_at, tasks.c.created_at)


def _filtered(connection: AsyncConnection, tenant_id: str, wanted: TaskFilter) -> Select[Any]:
    statement = TaskRepository(connection, tenant_id).select()
    agent = tasks.c.agent_name == wanted.agent
    if wanted.agent == DEFAULT_AGENT:  # tasks from before agents ran the built-in one
        agent = or_(agent, tasks.c.agent_name.is_(None))
    statement = statement.where(agent)
    if wanted.conversation_id is not None:
        statement = statement.where(tasks.c.conversation_id == wanted.conversation_id)
    if wanted.states is not None:
        statement = statement.where(tasks.c.status.in_(wanted.states))
    if wanted.changed_after is not None:
        statement = statement.where(_status_changed_at() > wanted.changed_after)
    return statement


async def task_page(
    connection: AsyncConnection,
    tenant_id: str,
    wanted: TaskFilter,
    *,
    cursor: Cursor | None,
    limit: int,
) -> tuple[Page[TaskRecord], int]:
    """A page of the tasks `wanted` names, newest first, and how many there are in all."""
    statement = _filtered(connection, tenant_id, wanted)
    total = await connection.scalar(select(func.count()).select_from(statement.subquery()))
    if cursor is not None:
        statement = statement.where(cursor.before(tasks.c.created_at, tasks.c.id))
    statement = statement.order_by(tasks.c.created_at.desc(), tasks.c.id.desc())
    rows = (await connection.execute(statement.limit(limit + 1))).all()
    fetched = [TaskRecord.model_validate(row._mapping) for row in rows]
    page = Page.of(fetched, limit, lambda task: Cursor(task.created_at, task.id))
    return page, int(total or 0)
