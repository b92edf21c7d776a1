"""Whether the store takes this process's writes, as its writes find it: while it does not,
runs start no new model or tool call (calls under way finish, and their results wait to be
stored), requests that must write are answered 503, and the lease keeper does not judge other
runners (their silence proves nothing while this process is cut off too)."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class StoreGate:
    """Open while the store takes writes. `failed()` closes it (a write failed in a way a
    retry can cure), `succeeded()` opens it again; nothing polls it: runs wait on it."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open = asyncio.Event()
        self._open.set()
        self._closed = asyncio.Event()
        self._down_since: float | None = None
        # When the store last failed a write (monotonic): a stretch without failures since
        # is how long this process has seen the store steadily.
        self._last_failure: float | None = None

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def failed(self) -> None:
        now = self._clock()
        self._last_failure = now
        if self._open.is_set():
            self._open.clear()
            self._closed.set()
            self._down_since = now
            logger.warning("the store is unavailable: runs pause their calls until it is back")

    def succeeded(self) -> None:
        if not self._open.is_set():
            down = self.down_for()
            self._open.set()
            self._closed.clear()
            self._down_since = None
            logger.warning("the store is back after %.1f s: paused runs go on", down)

    def down_for(self) -> float:
        """How long the store has been unavailable (0 while it is available)."""
        return 0.0 if self._down_since is None else self._clock() - self._down_since

    def steady_since(self, since: float) -> float:
        """How long the store has taken writes without a failure, counting from `since` at
        the earliest (monotonic)."""
        start = since if self._last_failure is None else max(since, self._last_failure)
        return self._clock() - start if self.is_open else 0.0

    async def wait_closed(self, timeout_s: float) -> None:
        """Returns once the store is unavailable, or after `timeout_s`."""
        if not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._closed.wait()

    async def wait_open(self) -> None:
        """Returns once the store takes writes (at once while it does)."""
        if not self._open.is_set():
            await self._open.wait()
