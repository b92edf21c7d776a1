"""The limit store's contract, on every store: sliding windows that refuse with an exact
`retry_after_s`, all-or-nothing acquisitions, settling to real amounts, releasing, windows
filled from the durable record before they admit anything, each grant counted once; the Redis
ones against the real Redis, shared by two clients. Then what only the Redis store does."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from decimal import Decimal

import pytest

from app.governance.limits import (
    Grant,
    History,
    InProcessLimitStore,
    LimitRequest,
    LimitStore,
    PastEntry,
    RecordedWindows,
    RedisLimitStore,
    Refusal,
    ResilientLimitStore,
    cost_units,
    usd_of_units,
)
from tests.governance.windows import REDIS_URL, Clock, Record

StoreFactory = Callable[..., LimitStore]


@asynccontextmanager
async def stores(kind: str, clock: Clock, prefix: str) -> AsyncIterator[StoreFactory]:
    """Builds stores of `kind` sharing one set of windows: for Redis, separate clients on one
    prefix; the others keep theirs in the process, so each build is the same store."""
    made: list[LimitStore] = []

    def build(history: History | None = None) -> LimitStore:
        store: LimitStore
        if kind == "redis":
            store = RedisLimitStore(REDIS_URL, history=history, prefix=prefix, clock=clock)
        elif kind == "resilient":
            redis = RedisLimitStore(REDIS_URL, history=history, prefix=prefix, clock=clock)
            recorded = RecordedWindows(history, clock=clock)
            store = ResilientLimitStore(redis, recorded, history=history, wall_clock=clock)
        elif made:
            return made[0]
        elif kind == "recorded":
            store = RecordedWindows(history, clock=clock)
        else:
            store = InProcessLimitStore(history=history, clock=clock)
        made.append(store)
        return store

    try:
        yield build
    finally:
        for store in made:
            await store.aclose()


@pytest.fixture(params=["in-process", "redis", "recorded", "resilient"])
async def make_store(
    request: pytest.FixtureRequest, clock: Clock, prefix: str
) -> AsyncIterator[StoreFactory]:
    async with stores(request.param, clock, prefix) as build:
        yield build


@pytest.fixture(params=["in-process", "redis", "resilient"])
async def make_caching_store(
    request: pytest.FixtureRequest, clock: Clock, prefix: str
) -> AsyncIterator[StoreFactory]:
    """The stores that hold their windows (RecordedWindows re-reads the record instead)."""
    async with stores(request.param, clock, prefix) as build:
        yield build


def calls(limit: int, window_s: float = 60.0, amount: int = 1) -> LimitRequest:
    return LimitRequest("t:calls", amount, limit, window_s, "calls_per_minute")


def tokens(amount: int, limit: int = 1_000) -> LimitRequest:
    return LimitRequest("t:tokens", amount, limit, 60.0, "tokens_per_minute")


async def test_the_window_refuses_the_one_past_the_limit_with_an_exact_retry_after(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store()
    for _ in range(3):
        assert isinstance(await store.acquire([calls(3)]), Grant)
        clock.now += 10
    refused = await store.acquire([calls(3)])
    assert isinstance(refused, Refusal)
    assert refused.used == 3
    assert refused.request.name == "calls_per_minute"
    # the oldest entry (30 s ago) leaves the 60-s window in 30 s
    assert refused.retry_after_s == pytest.approx(30.0)

    clock.now += 30.001  # the oldest left: exactly one fits again
    assert isinstance(await store.acquire([calls(3)]), Grant)
    assert isinstance(await store.acquire([calls(3)]), Refusal)


async def test_amounts_settle_to_real_usage_and_release_gives_back(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    grant = await store.acquire([tokens(700)])
    assert isinstance(grant, Grant)
    assert isinstance(await store.acquire([tokens(400)]), Refusal)

    await store.settle(grant, {"t:tokens": 500})
    await store.settle(grant, {"t:tokens": 500})  # idempotent
    assert await store.usage("t:tokens", 60.0) == 500
    second = await store.acquire([tokens(400)])
    assert isinstance(second, Grant)
    assert await store.usage("t:tokens", 60.0) == 900

    await store.release(second)
    await store.release(second)  # idempotent
    await store.settle(grant, {"t:tokens": 0})
    assert await store.usage("t:tokens", 60.0) == 0


async def test_an_acquisition_is_all_or_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    cost = LimitRequest("t:cost", 10, 10, 3_600.0, "cost_per_hour_usd")
    assert isinstance(await store.acquire([cost]), Grant)
    both = [calls(5), LimitRequest("t:cost", 1, 10, 3_600.0, "cost_per_hour_usd")]
    refused = await store.acquire(both)
    assert isinstance(refused, Refusal)
    assert refused.request.name == "cost_per_hour_usd"
    assert await store.usage("t:calls", 60.0) == 0  # nothing was recorded on the first


async def test_an_amount_over_the_limit_never_fits(make_store: StoreFactory) -> None:
    refused = await make_store().acquire([calls(5, amount=6)])
    assert isinstance(refused, Refusal)
    assert refused.retry_after_s is None


async def test_concurrent_acquisitions_never_cross_the_limit(make_store: StoreFactory) -> None:
    stores = [make_store(), make_store()]  # for Redis: two clients racing
    outcomes = await asyncio.gather(
        *[stores[i % 2].acquire([calls(100, amount=3)]) for i in range(50)]
    )
    assert sum(isinstance(o, Grant) for o in outcomes) == 33
    assert await stores[0].usage("t:calls", 60.0) == 99


async def test_settling_an_entry_that_left_its_window_changes_nothing(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store()
    grant = await store.acquire([calls(10, amount=4)])
    assert isinstance(grant, Grant)
    clock.now += 61
    assert await store.usage("t:calls", 60.0) == 0
    await store.settle(grant, {"t:calls": 9})
    await store.release(grant)
    assert await store.usage("t:calls", 60.0) == 0
    assert isinstance(await store.acquire([calls(10, amount=10)]), Grant)


async def test_a_window_is_filled_from_the_record_before_it_admits_anything(
    make_store: StoreFactory, clock: Clock
) -> None:
    start = clock.now - 60
    record = Record(
        {"t:calls": [PastEntry("a", clock.now - 50, 4), PastEntry("b", clock.now - 10, 3)]}
    )
    store = make_store(record)
    refused = await store.acquire([calls(8, amount=2)])
    assert isinstance(refused, Refusal)
    assert refused.used == 7
    assert refused.retry_after_s == pytest.approx(10.0)  # when the older one leaves
    clock.now += 11
    assert await store.usage("t:calls", 60.0) == 3
    assert isinstance(await store.acquire([calls(8, amount=2)]), Grant)
    assert record.reads[0] == {"t:calls": start}


async def test_a_grant_the_record_holds_already_counts_once(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(Record({"t:tokens": [PastEntry("call-1", clock.now - 5, 500)]}))
    again = await store.acquire([tokens(500)], grant_id="call-1")
    assert isinstance(again, Grant)
    assert again.id == "call-1"
    assert await store.usage("t:tokens", 60.0) == 500
    assert isinstance(await store.acquire([tokens(500)], grant_id="call-2"), Grant)
    assert isinstance(await store.acquire([tokens(1)], grant_id="call-3"), Refusal)


async def test_settling_a_grant_whose_entries_the_window_lost_puts_them_back_at_its_time(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store()
    # made before the window was lost (another process's windows, a restarted Redis)
    lost = Grant("lost", (tokens(700), calls(10)), clock.now - 30)
    await store.settle(lost, {"t:tokens": 500})
    assert await store.usage("t:tokens", 60.0) == 500
    assert await store.usage("t:calls", 60.0) == 1  # not named: its reserved amount
    clock.now += 30.001
    assert await store.usage("t:tokens", 60.0) == 0


async def test_the_record_is_read_once_per_window_a_store_does_not_hold(
    make_caching_store: StoreFactory, clock: Clock
) -> None:
    record = Record({"t:calls": [PastEntry("a", clock.now - 5, 2)]})
    first, second = make_caching_store(record), make_caching_store(record)
    await first.acquire([calls(10)])
    await second.acquire([calls(10)])
    await first.acquire([calls(10), tokens(1)])
    assert record.reads == [{"t:calls": clock.now - 60}, {"t:tokens": clock.now - 60}]
    assert await first.usage("t:calls", 60.0) == 5


def test_cost_units_are_exact_and_round_up() -> None:
    assert cost_units(Decimal("0.000000001")) == 1
    assert cost_units(Decimal("0.0000000011")) == 2
    assert cost_units(Decimal("12.5")) == 12_500_000_000
    assert usd_of_units(cost_units(Decimal("0.123456789"))) == Decimal("0.123456789")
