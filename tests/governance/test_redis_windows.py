"""What only the Redis store does: windows of two keys that expire, filled again from the
durable record when Redis lost them (all or part, at a restart or a flush), once however many
instances fill them at once; reservations lost while their calls ran put back when they
settle; a stale pooled connection retried once. And the windows decided on the record alone
while Redis is away (`RecordedWindows`)."""

import asyncio
from collections.abc import Mapping, Sequence

import pytest
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.governance.limits import (
    Grant,
    LimitRequest,
    LimitStoreUnavailable,
    PastEntry,
    RecordedWindows,
    RedisLimitStore,
    Refusal,
)
from tests.faults import private_redis
from tests.governance.windows import REDIS_URL, Clock, Record

DAY = 86_400.0


def calls(limit: int = 10, amount: int = 1, window_s: float = 60.0) -> LimitRequest:
    return LimitRequest("t:calls", amount, limit, window_s, "calls_per_minute")


def tokens(amount: int, limit: int = 1_000) -> LimitRequest:
    return LimitRequest("t:tokens", amount, limit, 60.0, "tokens_per_minute")


async def lose(prefix: str, key: str, parts: Sequence[str] = ("z", "a")) -> None:
    """What a restart, a flush or an eviction does to a window: its keys are gone."""
    client = Redis.from_url(REDIS_URL)
    try:
        await client.delete(*(f"{prefix}{key}:{part}" for part in parts))
    finally:
        await client.aclose()


async def test_a_window_is_two_keys_that_expire_and_refusals_leave_nothing(
    clock: Clock, prefix: str
) -> None:
    store = RedisLimitStore(REDIS_URL, prefix=prefix, clock=clock)
    client = Redis.from_url(REDIS_URL)
    try:
        assert isinstance(await store.acquire([calls(1, window_s=30)]), Grant)
        assert isinstance(await store.acquire([calls(1, window_s=30)]), Refusal)
        keys = sorted([key async for key in client.scan_iter(match=f"{prefix}*")])
        assert keys == [f"{prefix}t:calls:a".encode(), f"{prefix}t:calls:z".encode()]
        for key in keys:
            assert 0 < await client.ttl(key) <= 31
        # the refusal added no entry: one grant, the total and the fill marker
        assert await client.hlen(f"{prefix}t:calls:a") == 3
    finally:
        await client.aclose()
        await store.aclose()


@pytest.mark.parametrize("parts", [("z", "a"), ("a",), ("z",)], ids=["both", "amounts", "times"])
async def test_a_window_redis_lost_is_filled_from_the_record_before_it_admits_again(
    clock: Clock, prefix: str, parts: tuple[str, ...]
) -> None:
    record = Record({"t:calls": [PastEntry("a", clock.now - 50, 4), PastEntry("b", clock.now, 3)]})
    store = RedisLimitStore(REDIS_URL, history=record, prefix=prefix, clock=clock)
    try:
        grant = await store.acquire([calls(amount=2)], grant_id="g")
        assert isinstance(grant, Grant)
        assert await store.usage("t:calls", 60.0) == 9
        record.add("t:calls", PastEntry("g", grant.at, 2))  # its call was recorded
        await lose(prefix, "t:calls", parts)

        refused = await store.acquire([calls(amount=2)])  # 9 + 2 > 10: not a forgotten window
        assert isinstance(refused, Refusal)
        assert refused.used == 9
        assert refused.retry_after_s == pytest.approx(10.0)
        assert len(record.reads) == 2
    finally:
        await store.aclose()


class Gate(Record):
    """A record whose reads all wait until `readers` of them have begun."""

    def __init__(self, entries: Mapping[str, Sequence[PastEntry]], readers: int) -> None:
        super().__init__(entries)
        self._readers = readers
        self._all_in = asyncio.Event()

    async def __call__(self, since: Mapping[str, float]) -> dict[str, list[PastEntry]]:
        result = await super().__call__(since)
        if len(self.reads) >= self._readers:
            self._all_in.set()
        await self._all_in.wait()
        return result


async def test_two_stores_filling_one_window_at_once_count_it_once(
    clock: Clock, prefix: str
) -> None:
    key = "t:tokens"
    record = Gate({key: [PastEntry(f"e{i}", clock.now - i, 10) for i in range(5)]}, readers=2)
    # Two chunks of two entries and one of one each: the fills interleave.
    one, two = (
        RedisLimitStore(REDIS_URL, history=record, prefix=prefix, clock=clock, chunk=2)
        for _ in range(2)
    )
    try:
        outcomes = await asyncio.gather(
            one.acquire([tokens(10)], grant_id="x"), two.acquire([tokens(10)], grant_id="y")
        )
        assert all(isinstance(outcome, Grant) for outcome in outcomes)
        assert len(record.reads) == 2  # both found it empty and filled it
        assert await one.usage(key, 60.0) == 50 + 10 + 10
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_call_whose_reservation_redis_lost_counts_when_it_settles_and_once_recorded(
    clock: Clock, prefix: str
) -> None:
    key = "t:tokens"
    record = Record()
    one, two = (  # two instances
        RedisLimitStore(REDIS_URL, history=record, prefix=prefix, clock=clock) for _ in range(2)
    )
    try:
        first = await one.acquire([tokens(700)], grant_id="c1")
        assert isinstance(first, Grant)
        await lose(prefix, key)  # Redis restarted while c1 ran
        clock.now += 1
        second = await two.acquire([tokens(100)], grant_id="c2")  # filled: c1 is nowhere
        assert isinstance(second, Grant)
        assert await two.usage(key, 60.0) == 100

        await one.settle(first, {key: 500})  # c1 ends: put back with its real amount
        assert await two.usage(key, 60.0) == 600
        record.add(key, PastEntry("c1", first.at, 500))  # c1's cost record is stored

        await lose(prefix, key)  # lost again while c2 runs
        assert await one.usage(key, 60.0) == 500  # c1 once: recorded, and made by `one` lately
        await two.settle(second, {key: 80})
        assert await one.usage(key, 60.0) == 580  # c2 put back
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_lost_window_is_filled_with_the_grants_made_here_lately_the_record_lacks(
    clock: Clock, prefix: str
) -> None:
    key = "t:tokens"
    record = Record({key: [PastEntry("old", clock.now - 30, 50)]})
    store = RedisLimitStore(REDIS_URL, history=record, prefix=prefix, clock=clock)
    try:
        done = await store.acquire([tokens(700), calls()], grant_id="done")
        running = await store.acquire([tokens(200), calls()], grant_id="running")
        assert isinstance(done, Grant)
        assert isinstance(running, Grant)
        await store.settle(done, {key: 300})  # its cost record is not stored yet
        await lose(prefix, key)
        await lose(prefix, "t:calls")
        assert await store.usage(key, 60.0) == 50 + 300 + 200
        assert await store.usage("t:calls", 60.0) == 2
    finally:
        await store.aclose()


async def test_a_stale_pooled_connection_is_retried_once(clock: Clock) -> None:
    async with private_redis() as server:
        record = Record({"t:calls": [PastEntry("a", clock.now - 5, 3)]})
        store = RedisLimitStore(server.url, history=record, clock=clock)
        bare = Redis.from_url(server.url, retry=Retry(NoBackoff(), 0))  # never retries
        try:
            assert isinstance(await store.acquire([calls()]), Grant)
            await bare.ping()
            await server.kill()
            await server.start()  # empty, on the same port: both pooled connections are stale

            with pytest.raises(redis_errors.ConnectionError):
                await bare.ping()  # what a command on a stale connection does, not retried
            assert isinstance(await store.acquire([calls()]), Grant)  # retried on a new one
            # The restarted Redis's window was filled from the record (3) and the grant made
            # before (not recorded yet); then this one.
            assert await store.usage("t:calls", 60.0) == 5

            await server.kill()
            with pytest.raises(redis_errors.ConnectionError):  # once only: then it is raised
                await store.acquire([calls()])
        finally:
            await bare.aclose()
            await store.aclose()


async def test_recorded_windows_read_the_record_again_at_most_every_refresh_from_where_they_were(
    clock: Clock,
) -> None:
    day = calls(limit=20, window_s=DAY)
    record = Record({"t:calls": [PastEntry("old", clock.now - 3_600, 5)]})
    windows = RecordedWindows(record, clock=clock, refresh_s=1.0)
    assert isinstance(await windows.acquire([day], grant_id="mine"), Grant)
    record.add("t:calls", PastEntry("other", clock.now, 2))  # another instance's call
    assert isinstance(await windows.acquire([day], grant_id="mine-2"), Grant)
    assert await windows.usage("t:calls", DAY) == 7  # not read again yet: 5 and its own 2
    assert len(record.reads) == 1

    clock.now += 1
    record.add("t:calls", PastEntry("mine", clock.now - 1, 1))  # its own call, recorded
    assert await windows.usage("t:calls", DAY) == 9  # old, other, mine (once), mine-2
    assert record.reads == [{"t:calls": clock.now - 1 - DAY}, {"t:calls": clock.now - 1 - 60}]

    refused = await windows.acquire([calls(limit=20, amount=12, window_s=DAY)])
    assert isinstance(refused, Refusal)
    assert refused.used == 9


class Unreachable(Record):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    async def __call__(self, since: Mapping[str, float]) -> dict[str, list[PastEntry]]:
        if self.down:
            raise LimitStoreUnavailable("the database is unavailable")
        return await super().__call__(since)


async def test_recorded_windows_keep_their_last_reading_and_cannot_decide_a_window_never_read(
    clock: Clock,
) -> None:
    record = Unreachable()
    record.add("t:calls", PastEntry("old", clock.now - 10, 8))
    windows = RecordedWindows(record, clock=clock)
    assert isinstance(await windows.acquire([calls()]), Grant)
    record.down = True
    clock.now += 5
    assert isinstance(await windows.acquire([calls()]), Grant)  # 8 and its own two
    assert isinstance(await windows.acquire([calls()]), Refusal)
    with pytest.raises(LimitStoreUnavailable):
        await windows.acquire([tokens(1)])
