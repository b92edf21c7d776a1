"""Waiting for a condition over the state a scenario observes (the fake LLM's calls, the
followers' events) without polling: every observer calls `Changes.notify()` when its state
changes, and a waiter re-checks its condition then, within a deadline that fails loudly."""

import asyncio
from collections.abc import Callable


class Changes:
    """A wake-up shared by the observers of one scenario.

    `wait_for(condition)` returns as soon as `condition()` is true, checking it at once and
    after each `notify()`; past `timeout_s` it raises `AssertionError` naming `what` and, if
    given, `describe()` (the state that was still missing). A condition over state that does
    not notify (a process's exit, the database) is checked only when something else changes."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for(
        self,
        condition: Callable[[], bool],
        *,
        timeout_s: float,
        what: str,
        describe: Callable[[], str] | None = None,
    ) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    # Taken before the check: a change during the check wakes the wait.
                    changed = self._changed
                    if condition():
                        return
                    await changed.wait()
        except TimeoutError:
            state = f": {describe()}" if describe is not None else ""
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what}{state}"
            ) from None
