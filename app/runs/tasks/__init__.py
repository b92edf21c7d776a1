"""What a caller does with tasks, whichever way they come in (REST, A2A, the OpenAI-compatible
endpoint, a schedule's firing, the CLI): submit, read, cancel, follow, replay and fork; and
what a task's run is given (`RunInputs`), rebuilt from the store when another instance
accepted it."""

from app.runs.tasks.firing import ScheduleFirings
from app.runs.tasks.idempotency import IdempotencyKeyReused
from app.runs.tasks.inputs import RunInputs, turn_history
from app.runs.tasks.replays import UnfinishedSource, fork_task, replay_task
from app.runs.tasks.service import TaskService
from app.storage.tasks import TaskFilter

__all__ = [
    "IdempotencyKeyReused",
    "RunInputs",
    "ScheduleFirings",
    "TaskFilter",
    "TaskService",
    "UnfinishedSource",
    "fork_task",
    "replay_task",
    "turn_history",
]
