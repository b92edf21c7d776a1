"""Who in this process waits for news of a task stored by any instance: streams following a run
another instance owns, cancels waiting for a run's end. Notices (`app.storage.notify.EVENTS`)
wake them; what happened they read from the store."""

import asyncio
import contextlib
from collections.abc import Iterator
from uuid import UUID

from app.storage.notify import stored_events


class TaskWaiters:
    """Events per task id, set when a notice names the task (or when notices may have been
    missed: all of them)."""

    def __init__(self) -> None:
        self._waiting: dict[UUID, set[asyncio.Event]] = {}

    @contextlib.contextmanager
    def watch(self, task_id: UUID) -> Iterator[asyncio.Event]:
        """An event set at each notice of the task while the block runs; the holder clears it
        before it reads the store, so a notice that comes during the read is not lost."""
        event = asyncio.Event()
        self._waiting.setdefault(task_id, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._waiting.get(task_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiting[task_id]

    def stored(self, payload: str) -> None:
        """An `EVENTS` notice: `task_id:last_seq` pairs."""
        for task_id, _ in stored_events(payload):
            for event in self._waiting.get(task_id, ()):
                event.set()

    def wake(self, task_id: UUID) -> None:
        for event in self._waiting.get(task_id, ()):
            event.set()

    def wake_all(self) -> None:
        for events in self._waiting.values():
            for event in events:
                event.set()

    def __len__(self) -> int:
        return len(self._waiting)
