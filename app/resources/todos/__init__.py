"""Tasks' todo lists: what a run's todo_* tools keep, stored per tenant and task (no API
manages them)."""

from app.resources.todos.lists import TodoLists

__all__ = ["TodoLists"]
