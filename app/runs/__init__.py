"""Runs: starting tasks as in-process agent runs, cancelling them, recording every event as it
happens and serving each task's stream (replayed from the store, then live)."""

from app.runs.channel import RunChannel, StreamEvent
from app.runs.errors import InvalidSubmission, TaskAlreadyFinished
from app.runs.manager import RunManager
from app.runs.models import ChatMessage, TaskBudget, TaskSubmission

__all__ = [
    "ChatMessage",
    "InvalidSubmission",
    "RunChannel",
    "RunManager",
    "StreamEvent",
    "TaskAlreadyFinished",
    "TaskBudget",
    "TaskSubmission",
]
