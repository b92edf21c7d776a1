"""A cached value holds for its time and no longer, the cache stays within its bound, and a
change made while a value was being read is never overwritten by that read."""

import asyncio

import pytest

from app.caches import Cached, TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Loader:
    """Loads `value` when called, counting its calls; with `gate` set, each call waits for
    the test to open it (and says it has begun)."""

    def __init__(self, value: str | None, *, gated: bool = False) -> None:
        self.value = value
        self.calls = 0
        self.began = asyncio.Event()
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()

    async def __call__(self) -> str | None:
        self.calls += 1
        self.began.set()
        await self.gate.wait()
        return self.value


async def ready_tasks_ran() -> None:
    """Returns once every task ready before the call has run up to where it waits (the loop
    runs ready callbacks in order)."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_soon(done.set)
    await done.wait()


def cache(clock: Clock, *, ttl_s: float = 5.0, max_entries: int = 10) -> TtlCache[str, str | None]:
    return TtlCache(ttl_s=ttl_s, max_entries=max_entries, clock=clock)


async def test_a_value_holds_for_its_time_from_when_its_read_began() -> None:
    clock = Clock()
    tenants = cache(clock)
    first = Loader("acme")
    assert await tenants.get_or_load("t", first) == "acme"
    clock.now += 4.9
    assert await tenants.get_or_load("t", Loader("changed")) == "acme"
    assert tenants.get("t") == Cached("acme")
    clock.now += 0.1
    assert tenants.get("t") is None
    assert await tenants.get_or_load("t", Loader("changed")) == "changed"
    assert first.calls == 1


async def test_a_read_that_took_longer_than_the_time_is_returned_but_not_kept() -> None:
    clock = Clock()
    tenants = cache(clock)
    slow = Loader("acme", gated=True)
    reading = asyncio.create_task(tenants.get_or_load("t", slow))
    await slow.began.wait()
    clock.now += 5.0
    slow.gate.set()
    assert await reading == "acme"
    assert tenants.get("t") is None


async def test_none_is_cached_and_told_apart_from_a_miss() -> None:
    tenants = cache(Clock())
    assert tenants.get("unknown") is None
    nobody = Loader(None)
    assert await tenants.get_or_load("unknown", nobody) is None
    assert await tenants.get_or_load("unknown", nobody) is None
    assert tenants.get("unknown") == Cached(None)
    assert nobody.calls == 1


async def test_with_no_time_nothing_is_kept() -> None:
    tenants = cache(Clock(), ttl_s=0)
    loader = Loader("acme")
    assert await tenants.get_or_load("t", loader) == "acme"
    assert await tenants.get_or_load("t", loader) == "acme"
    tenants.put("t", "put")
    assert tenants.get("t") is None
    assert loader.calls == 2


async def test_with_no_time_concurrent_reads_do_not_wait_for_each_other() -> None:
    tenants = cache(Clock(), ttl_s=0)
    slow = Loader("slow", gated=True)
    reading = asyncio.create_task(tenants.get_or_load("t", slow))
    await slow.began.wait()
    assert await tenants.get_or_load("t", Loader("quick")) == "quick"
    slow.gate.set()
    assert await reading == "slow"


async def test_past_its_bound_the_oldest_entry_goes() -> None:
    tenants = cache(Clock(), max_entries=2)
    tenants.put("a", "1")
    tenants.put("b", "2")
    tenants.put("a", "1 again")  # stored anew: now the newest
    tenants.put("c", "3")
    assert tenants.get("b") is None
    assert tenants.get("a") == Cached("1 again")
    assert tenants.get("c") == Cached("3")


def test_a_cache_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        TtlCache[str, str](ttl_s=1, max_entries=0)


async def test_put_and_invalidate_apply_at_once() -> None:
    tenants = cache(Clock())
    await tenants.get_or_load("t", Loader("old"))
    tenants.put("t", "new")
    assert tenants.get("t") == Cached("new")
    tenants.invalidate("t")
    assert tenants.get("t") is None
    assert await tenants.get_or_load("t", Loader("read")) == "read"


async def test_update_changes_a_cached_value_and_keeps_its_expiry() -> None:
    clock = Clock()
    keys = cache(clock)

    def used(value: str | None) -> str:
        return f"{value}, used"

    keys.update("absent", used)
    assert keys.get("absent") is None
    keys.put("k", "revoked")  # what is cached now is what changes
    clock.now += 3
    keys.update("k", used)
    assert keys.get("k") == Cached("revoked, used")
    clock.now += 2
    keys.update("k", used)
    assert keys.get("k") is None


@pytest.mark.parametrize("change", ["invalidate", "put"])
async def test_a_read_begun_before_a_change_is_not_kept_after_it(change: str) -> None:
    tenants = cache(Clock())
    stale = Loader("before", gated=True)
    reading = asyncio.create_task(tenants.get_or_load("t", stale))
    await stale.began.wait()
    if change == "put":
        tenants.put("t", "changed")
    else:
        tenants.invalidate("t")
    stale.gate.set()
    assert await reading == "before"  # its caller asked before the change
    after = Loader("changed")
    assert await tenants.get_or_load("t", after) == "changed"
    assert after.calls == (0 if change == "put" else 1)
    assert tenants._loads == {}


async def test_callers_asking_while_a_key_loads_get_what_it_stored() -> None:
    tenants = cache(Clock())
    first = Loader("acme", gated=True)
    second = Loader("unused")
    one = asyncio.create_task(tenants.get_or_load("t", first))
    await first.began.wait()
    two = asyncio.create_task(tenants.get_or_load("t", second))
    await ready_tasks_ran()
    assert tenants._loads["t"].users == 2  # the second caller waits for the first's load
    other = await tenants.get_or_load("u", Loader("other"))  # another key does not wait
    first.gate.set()
    assert [await one, await two] == ["acme", "acme"]
    assert other == "other"
    assert (first.calls, second.calls) == (1, 0)
    assert tenants._loads == {}


async def test_a_caller_waiting_on_a_failed_load_loads_anew() -> None:
    tenants = cache(Clock())

    async def failing() -> str | None:
        began.set()
        await gate.wait()
        raise RuntimeError("database down")

    began, gate = asyncio.Event(), asyncio.Event()
    one = asyncio.create_task(tenants.get_or_load("t", failing))
    await began.wait()
    retry = Loader("acme")
    two = asyncio.create_task(tenants.get_or_load("t", retry))
    await ready_tasks_ran()
    assert tenants._loads["t"].users == 2
    gate.set()
    with pytest.raises(RuntimeError, match="database down"):
        await one
    assert await two == "acme"
    assert retry.calls == 1
    assert tenants.get("t") == Cached("acme")
    assert tenants._loads == {}


async def test_a_caller_cancelled_while_loading_leaves_the_key_to_the_next() -> None:
    tenants = cache(Clock())
    stuck = Loader("never", gated=True)
    one = asyncio.create_task(tenants.get_or_load("t", stuck))
    await stuck.began.wait()
    waiting = Loader("acme")
    two = asyncio.create_task(tenants.get_or_load("t", waiting))
    await ready_tasks_ran()
    one.cancel()
    with pytest.raises(asyncio.CancelledError):
        await one
    assert await two == "acme"
    assert tenants.get("t") == Cached("acme")
    assert tenants._loads == {}
