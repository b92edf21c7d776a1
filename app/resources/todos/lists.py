"""Tasks' todo lists, stored: what a run's todo_* tools reach through `ToolServices.todos`."""

from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

from app.resources.todos.store import TodoRecord, TodoRepository
from app.storage.database import Database
from app.tools.errors import ToolError
from app.tools.services import Todo, TodoList, not_found

# A list is a plan, not a database: past this, a model is looping.
DEFAULT_MAX_ITEMS = 200


def _utc_now() -> datetime:
    return datetime.now(UTC)


class TodoLists:
    """Every task's todo list; `for_task` binds one to a run. Each change is its own short
    transaction, so a list is current for every instance at once and survives restarts."""

    def __init__(
        self,
        database: Database,
        *,
        max_items: int = DEFAULT_MAX_ITEMS,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._database = database
        self._max_items = max_items
        self._clock = clock

    def for_task(self, tenant_id: str, task_id: UUID) -> TodoList:
        return TaskTodoList(
            self._database, tenant_id, task_id, max_items=self._max_items, clock=self._clock
        )


class TaskTodoList:
    """One task's todo list (`TodoList`). Ids of another task's or tenant's todos are not
    found."""

    def __init__(
        self,
        database: Database,
        tenant_id: str,
        task_id: UUID,
        *,
        max_items: int,
        clock: Callable[[], datetime],
    ) -> None:
        self._database = database
        self._tenant_id = tenant_id
        self._task_id = task_id
        self._max_items = max_items
        self._clock = clock

    async def add(self, text: str) -> Todo:
        async with self._database.transaction() as connection:
            todos = TodoRepository(connection, self._tenant_id)
            if await todos.count(self._task_id) >= self._max_items:
                raise ToolError(
                    f"this task's list already holds {self._max_items} todos; complete or "
                    "delete some before adding more"
                )
            record = await todos.add(self._task_id, text, at=self._clock())
        return _todo(record)

    async def items(self) -> list[Todo]:
        async with self._database.read() as connection:
            records = await TodoRepository(connection, self._tenant_id).items(self._task_id)
        return [_todo(record) for record in records]

    async def complete(self, todo_id: int) -> Todo:
        async with self._database.transaction() as connection:
            todos = TodoRepository(connection, self._tenant_id)
            record = await todos.complete(self._task_id, todo_id, at=self._clock())
        if record is None:
            raise _missing(todo_id)
        return _todo(record)

    async def delete(self, todo_id: int) -> None:
        async with self._database.transaction() as connection:
            deleted = await TodoRepository(connection, self._tenant_id).delete(
                self._task_id, todo_id
            )
        if not deleted:
            raise _missing(todo_id)


def _todo(record: TodoRecord) -> Todo:
    return Todo(id=record.id, text=record.text, done=record.done, created_at=record.created_at)


def _missing(todo_id: int) -> ToolError:
    return not_found(f"this task has no todo {todo_id} (todo_list shows its todos)")
