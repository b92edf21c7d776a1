"""A value slow to build (LiteLLM's import), built once, by its first user: in a background
thread for a coroutine (whose loop goes on meanwhile), else in the caller's thread."""

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

_T = TypeVar("_T")


class BackgroundLoad(Generic[_T]):
    """`build`, run once, by whichever asks first: `wait` in a daemon thread, `result` in the
    caller's thread."""

    def __init__(self, build: Callable[[], _T], *, name: str) -> None:
        self._build = build
        self._name = name
        self._lock = threading.Lock()
        self._future: Future[_T] | None = None

    def result(self) -> _T:
        """The value: built here, in the caller's thread, if no build was started; else
        waited for (blocking the thread). A failed build raises its error, every time."""
        future, owner = self._claim()
        if owner:
            self._run(future)
        return future.result()

    async def wait(self) -> _T:
        """The value, the build started in the background if it was not: the loop goes on
        meanwhile and the waiter is woken when the build ends. Cancelling the waiter does not
        cancel the build."""
        future = self._started()
        if future.done():  # as every call after the first finds it: no hop through the loop
            return future.result()
        return await asyncio.wrap_future(future)

    def built(self) -> bool:
        """Whether the value is there (built, without failing): no waiter would wait."""
        future = self._future
        return future is not None and future.done() and future.exception() is None

    def result_if_built(self) -> _T | None:
        """The value if it is there, else None (nothing is built or waited for)."""
        return self._future.result() if self.built() and self._future is not None else None

    def failure(self) -> BaseException | None:
        """Why the build failed, once it has."""
        future = self._future
        return future.exception() if future is not None and future.done() else None

    def _started(self) -> "Future[_T]":
        future, owner = self._claim()
        if owner:
            threading.Thread(target=self._run, args=(future,), name=self._name, daemon=True).start()
        return future

    def _claim(self) -> tuple["Future[_T]", bool]:
        """The build's future, and whether the caller is the one to run it."""
        with self._lock:
            if self._future is not None:
                return self._future, False
            future: Future[_T] = Future()
            # Running from now on, so never cancelled: a cancelled waiter leaves it be.
            future.set_running_or_notify_cancel()
            self._future = future
            return future, True

    def _run(self, future: "Future[_T]") -> None:
        try:
            value = self._build()
        except BaseException as exc:  # every waiter gets it, rather than waiting forever
            future.set_exception(exc)
        else:
            future.set_result(value)
