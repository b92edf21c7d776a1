"""Short-lived asyncio tasks a part of the runs spawns and must be able to stop."""

import asyncio
from collections.abc import Coroutine
from typing import Any


class Background:
    """Holds the tasks it spawns (the event loop keeps only weak references) until they end."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_now(self) -> None:
        """Cancels what is still going, without waiting for it to stop."""
        for task in list(self._tasks):
            task.cancel()

    async def cancel(self, timeout_s: float = 1.0) -> None:
        """Cancels what is still going and waits up to `timeout_s` for it to stop."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
