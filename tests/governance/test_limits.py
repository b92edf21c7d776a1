"""The limit store's contract, on both backends: sliding windows that refuse with an exact
`retry_after_s`, all-or-nothing acquisitions, settling to real amounts, releasing; the Redis
one against the real Redis, shared by two clients."""

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from app.governance.limits import (
    Grant,
    InProcessLimitStore,
    LimitRequest,
    LimitStore,
    RedisLimitStore,
    Refusal,
    cost_units,
    usd_of_units,
)

REDIS_URL = os.environ.get("OMNIFORGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    prefix = f"omniforge-test:{uuid4().hex[:12]}:"
    yield prefix
    client = Redis.from_url(REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}*"):
            await client.delete(key)
    finally:
        await client.aclose()


StoreFactory = Callable[[], LimitStore]


@pytest.fixture(params=["in-process", "redis"])
async def make_store(
    request: pytest.FixtureRequest, clock: Clock, prefix: str
) -> AsyncIterator[StoreFactory]:
    """Builds stores sharing one set of windows (for Redis: separate clients, one prefix)."""
    made: list[LimitStore] = []
    shared = InProcessLimitStore(clock=clock)

    def build() -> LimitStore:
        store: LimitStore
        if request.param == "redis":
            store = RedisLimitStore(REDIS_URL, prefix=prefix, clock=clock)
        else:
            store = shared
        made.append(store)
        return store

    yield build
    for store in made:
        await store.aclose()


def calls(limit: int, window_s: float = 60.0, amount: int = 1) -> LimitRequest:
    return LimitRequest("t:calls", amount, limit, window_s, "calls_per_minute")


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
    tokens = LimitRequest("t:tokens", 700, 1_000, 60.0, "tokens_per_minute")
    grant = await store.acquire([tokens])
    assert isinstance(grant, Grant)
    more = LimitRequest("t:tokens", 400, 1_000, 60.0, "tokens_per_minute")
    assert isinstance(await store.acquire([more]), Refusal)

    await store.settle(grant, {"t:tokens": 500})
    await store.settle(grant, {"t:tokens": 500})  # idempotent
    assert await store.usage("t:tokens", 60.0) == 500
    second = await store.acquire([more])
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


async def test_redis_windows_expire_and_refusals_leave_nothing(clock: Clock, prefix: str) -> None:
    store = RedisLimitStore(REDIS_URL, prefix=prefix, clock=clock)
    client = Redis.from_url(REDIS_URL)
    try:
        assert isinstance(await store.acquire([calls(1, window_s=30)]), Grant)
        assert isinstance(await store.acquire([calls(1, window_s=30)]), Refusal)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        assert len(keys) == 3
        for key in keys:
            assert 0 < await client.ttl(key) <= 31
        assert await client.hlen(f"{prefix}t:calls:a") == 1  # the refusal added no entry
    finally:
        await client.aclose()
        await store.aclose()


def test_cost_units_are_exact_and_round_up() -> None:
    assert cost_units(Decimal("0.000000001")) == 1
    assert cost_units(Decimal("0.0000000011")) == 2
    assert cost_units(Decimal("12.5")) == 12_500_000_000
    assert usd_of_units(cost_units(Decimal("0.123456789"))) == Decimal("0.123456789")


async def test_past_calls_seed_a_window_the_process_never_held(clock: Clock) -> None:
    store = InProcessLimitStore(clock=clock)
    past = [(clock.now - 50, 4), (clock.now - 10, 3)]
    assert await store.seed("t:calls", past)
    assert await store.usage("t:calls", 60.0) == 7
    refused = await store.acquire([calls(8, amount=2)])
    assert isinstance(refused, Refusal)
    assert refused.retry_after_s == pytest.approx(10.0)  # when the older one leaves
    assert not await store.seed("t:calls", past)  # once only
    clock.now += 11
    assert await store.usage("t:calls", 60.0) == 3
    assert isinstance(await store.acquire([calls(8, amount=2)]), Grant)
    held = await store.acquire([LimitRequest("t:held", 1, 5, 60.0, "held")])
    assert isinstance(held, Grant)
    assert not await store.seed("t:held", past)  # a window in use is not filled again


async def test_redis_keeps_its_windows_and_takes_no_seed(prefix: str) -> None:
    store = RedisLimitStore(REDIS_URL, prefix=prefix)
    try:
        assert store.durable
        assert not await store.seed("t:calls", [(1.0, 5)])
        assert await store.usage("t:calls", 60.0) == 0
    finally:
        await store.aclose()
