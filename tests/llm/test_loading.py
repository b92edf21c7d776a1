"""A value built once by its first user: in a thread of its own for a coroutine, whose loop
goes on meanwhile; in the caller's thread for synchronous code."""

import asyncio
import threading

import pytest

from app.llm.loading import BackgroundLoad

LIMIT_S = 30.0


class Builds:
    """A build that records the threads it ran in and, if asked, waits to be let go."""

    def __init__(self, *, hold: bool = False, fails: bool = False) -> None:
        self.threads: list[threading.Thread] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self._fails = fails

    def __call__(self) -> str:
        self.threads.append(threading.current_thread())
        self.entered.set()
        if not self.release.wait(LIMIT_S):
            raise TimeoutError("never released")
        if self._fails:
            raise RuntimeError("cannot build")
        return "built"


async def test_a_coroutine_waits_for_a_build_in_another_thread_while_its_loop_goes_on() -> None:
    build = Builds(hold=True)
    load = BackgroundLoad(build, name="test-load")

    waiting = asyncio.create_task(load.wait())
    # The build is held until this coroutine, on the same loop, lets it go: had the wait
    # blocked the loop, it would never get here.
    assert await asyncio.to_thread(build.entered.wait, LIMIT_S)
    assert not waiting.done()
    build.release.set()

    async with asyncio.timeout(LIMIT_S):
        assert await waiting == "built"
    assert build.threads[0] is not threading.current_thread()


async def test_every_waiter_shares_one_build() -> None:
    build = Builds(hold=True)
    load = BackgroundLoad(build, name="test-load")

    waiters = [asyncio.create_task(load.wait()) for _ in range(5)]
    assert await asyncio.to_thread(build.entered.wait, LIMIT_S)
    build.release.set()
    async with asyncio.timeout(LIMIT_S):
        assert await asyncio.gather(*waiters) == ["built"] * 5
    assert await load.wait() == "built"
    assert await asyncio.to_thread(load.result) == "built"
    assert len(build.threads) == 1


def test_synchronous_code_builds_in_its_own_thread_when_no_build_was_started() -> None:
    build = Builds()
    load = BackgroundLoad(build, name="test-load")

    assert load.result() == "built"
    assert load.result() == "built"
    assert build.threads == [threading.current_thread()]


async def test_a_cancelled_waiter_leaves_the_build_going() -> None:
    build = Builds(hold=True)
    load = BackgroundLoad(build, name="test-load")

    first = asyncio.create_task(load.wait())
    assert await asyncio.to_thread(build.entered.wait, LIMIT_S)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    build.release.set()

    async with asyncio.timeout(LIMIT_S):
        assert await load.wait() == "built"
    assert len(build.threads) == 1


async def test_a_failed_build_fails_every_waiter_every_time_and_says_why() -> None:
    build = Builds(fails=True)
    load = BackgroundLoad(build, name="test-load")

    assert load.failure() is None
    for _ in range(2):
        with pytest.raises(RuntimeError, match="cannot build"):
            await load.wait()
    with pytest.raises(RuntimeError, match="cannot build"):
        await asyncio.to_thread(load.result)
    assert isinstance(load.failure(), RuntimeError)
    assert len(build.threads) == 1
