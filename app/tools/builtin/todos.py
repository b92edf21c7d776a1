"""The todo_* skills: a plan the agent keeps for its task, stored beside the task (through the
run's `ToolServices.todos`), so that it outlives a restart and is the same on every instance."""

from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.models import (
    NO_RETRY,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)
from app.tools.services import Todo, TodoList, require

MAX_TODO_CHARS = 2_000
_MAX_ID = 2**63 - 1  # the column is a 64-bit integer
_ID = {"type": "integer", "minimum": 1, "maximum": _MAX_ID, "description": "The todo's id."}
_TIMEOUT_S = 10


def _todos(context: ToolCallContext) -> TodoList:
    services = context.services
    return require(services.todos if services else None, "todo lists")


def _shown(todo: Todo) -> dict[str, Any]:
    return {
        "id": todo.id,
        "text": todo.text,
        "done": todo.done,
        "created_at": todo.created_at.isoformat(timespec="seconds"),
    }


def _definition(
    name: str, description: str, properties: dict[str, Any], summary: str, *, idempotent: bool
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        type=ToolType.SKILL,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": [key for key in properties if key != "status"],
            "additionalProperties": False,
        },
        timeout_s=_TIMEOUT_S,
        retry=NO_RETRY,
        idempotent=idempotent,
        visibility=ToolVisibilityConfig(summary_template=summary),
    )


class TodoAddTool(BaseTool):
    """Adds an item to the task's todo list."""

    def __init__(self) -> None:
        self._definition = _definition(
            "todo_add",
            "Adds an item to this task's todo list (a plan you keep while you work; it is "
            "kept with the task). Returns the new item with its id.",
            {
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_TODO_CHARS,
                    "description": "What is to be done.",
                }
            },
            "added todo {id}: {text}",
            idempotent=False,  # a second call adds a second item
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        todo = await _todos(context).add(arguments["text"])
        return ToolOutput(_shown(todo))


class TodoListTool(BaseTool):
    """Lists the task's todos, all or by status."""

    def __init__(self) -> None:
        self._definition = _definition(
            "todo_list",
            "Lists this task's todo items in the order they were added, with how many are "
            "open and done.",
            {
                "status": {
                    "type": "string",
                    "enum": ["all", "open", "done"],
                    "default": "all",
                    "description": "Which items to list.",
                }
            },
            "{open} open, {done} done",
            idempotent=True,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        status = arguments.get("status", "all")
        todos = await _todos(context).items()
        done = sum(todo.done for todo in todos)
        shown = [t for t in todos if status == "all" or t.done == (status == "done")]
        return ToolOutput(
            {"items": [_shown(t) for t in shown], "open": len(todos) - done, "done": done}
        )


class TodoCompleteTool(BaseTool):
    """Marks one of the task's todos done."""

    def __init__(self) -> None:
        self._definition = _definition(
            "todo_complete",
            "Marks an item of this task's todo list as done (by its id, from todo_add or "
            "todo_list).",
            {"id": _ID},
            "completed todo {id}",
            idempotent=False,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        todo = await _todos(context).complete(arguments["id"])
        return ToolOutput(_shown(todo))


class TodoDeleteTool(BaseTool):
    """Removes one of the task's todos."""

    def __init__(self) -> None:
        self._definition = _definition(
            "todo_delete",
            "Removes an item from this task's todo list (by its id).",
            {"id": _ID},
            "deleted todo {id}",
            idempotent=False,  # a second call finds nothing to delete and fails
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        await _todos(context).delete(arguments["id"])
        return ToolOutput({"id": arguments["id"], "deleted": True})


def todo_tools() -> list[BaseTool]:
    return [TodoAddTool(), TodoListTool(), TodoCompleteTool(), TodoDeleteTool()]
