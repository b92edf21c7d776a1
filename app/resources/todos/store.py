"""Tasks' todo lists (what the todo_* tools keep), within one tenant: rows, so that a list
outlives the process and is the same on every instance."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, delete, func, insert, select, update

from app.storage.repository import TenantScoped
from app.storage.tables import task_todos
from app.storage.text import storable


@dataclass(frozen=True, slots=True)
class TodoRecord:
    id: int
    task_id: UUID
    text: str
    done: bool
    created_at: datetime
    completed_at: datetime | None


class TodoRepository(TenantScoped):
    """One tenant's todos; every statement names the task too, so an id of another task (or
    tenant) is simply not found."""

    def _select(self, task_id: UUID) -> Select[Any]:
        c = task_todos.c
        return select(task_todos).where(c.tenant_id == self.tenant_id, c.task_id == task_id)

    async def add(self, task_id: UUID, text: str, *, at: datetime) -> TodoRecord:
        values: dict[str, Any] = {
            "tenant_id": self.tenant_id,
            "task_id": task_id,
            "text": storable(text),
            "done": False,
            "created_at": at,
            "completed_at": None,
        }
        result = await self.connection.execute(insert(task_todos).values(**values))
        assert result.inserted_primary_key is not None
        return TodoRecord(
            id=int(result.inserted_primary_key[0]),
            task_id=task_id,
            text=values["text"],
            done=False,
            created_at=at,
            completed_at=None,
        )

    async def items(self, task_id: UUID) -> list[TodoRecord]:
        """The task's todos in the order they were added."""
        statement = self._select(task_id).order_by(task_todos.c.id)
        return [_record(row._mapping) for row in await self.connection.execute(statement)]

    async def get(self, task_id: UUID, todo_id: int) -> TodoRecord | None:
        statement = self._select(task_id).where(task_todos.c.id == todo_id)
        row = (await self.connection.execute(statement)).first()
        return None if row is None else _record(row._mapping)

    async def count(self, task_id: UUID) -> int:
        c = task_todos.c
        statement = select(func.count()).where(c.tenant_id == self.tenant_id, c.task_id == task_id)
        return int((await self.connection.execute(statement)).scalar_one())

    async def complete(self, task_id: UUID, todo_id: int, *, at: datetime) -> TodoRecord | None:
        """Marks a todo done (once: completing it again keeps the first time); None when the
        task has no such todo."""
        c = task_todos.c
        await self.connection.execute(
            update(task_todos)
            .where(
                c.tenant_id == self.tenant_id,
                c.task_id == task_id,
                c.id == todo_id,
                c.done.is_(False),
            )
            .values(done=True, completed_at=at)
        )
        return await self.get(task_id, todo_id)

    async def delete(self, task_id: UUID, todo_id: int) -> bool:
        c = task_todos.c
        result = await self.connection.execute(
            delete(task_todos).where(
                c.tenant_id == self.tenant_id, c.task_id == task_id, c.id == todo_id
            )
        )
        return bool(result.rowcount)


def _record(row: Any) -> TodoRecord:
    return TodoRecord(
        id=row["id"],
        task_id=row["task_id"],
        text=row["text"],
        done=row["done"],
        created_at=row["created_at"],
        completed_at=row["completed_at"],
    )
