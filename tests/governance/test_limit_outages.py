"""The limits while Redis is away: killed under concurrent acquisitions, none fails and each is
decided (on the database's record); restarted empty, the day's spend is back from the recorded
cost rows before the next admission. Cut off but keeping its data, Redis gets what was spent
without it, once. Redis and the record both away: admission cannot be decided (503), calls in
runs go ahead. A call's reservation carries the id its cost record keeps."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from app.chain import ToolType
from app.governance.limits import (
    Grant,
    LimitRequest,
    LimitStoreUnavailable,
    PastEntry,
    RecordedWindows,
    RedisLimitStore,
    Refusal,
    ResilientLimitStore,
    cost_units,
)
from app.governance.quotas import DAY, QuotaGuard, TenantQuotas, admit_submission
from app.governance.window_history import WindowHistory
from app.storage import Database
from app.tools.base import BaseTool
from app.tools.executor import ToolExecutor
from app.tools.models import CallEstimate, ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from tests.cluster import free_port
from tests.factories import context_for, new_chain
from tests.faults import private_redis
from tests.governance.windows import Clock, Record, record_call, recorded_task

CENT = cost_units(Decimal("0.01"))


def resilient(url: str, history: Any, clock: Clock, **options: Any) -> ResilientLimitStore:
    """A store whose backoff passes only when the test moves `clock` (monotonic time)."""
    redis = RedisLimitStore(url, history=history, **options)
    return ResilientLimitStore(redis, RecordedWindows(history), history=history, clock=clock)


def degraded(store: ResilientLimitStore) -> bool:
    """Whether `store` decides without Redis, as of now."""
    return store.degraded


async def test_redis_killed_under_load_then_restarted_empty_keeps_the_days_cost_limit(
    database_url: str,
) -> None:
    tenant = f"w-{uuid4().hex[:12]}"
    key = f"{tenant}:cost_per_day_usd"
    limit = cost_units(Decimal("1.00"))
    cent = LimitRequest(key, CENT, limit, DAY, "cost_per_day_usd")
    database = Database(database_url)
    task_id = await recorded_task(database, tenant)
    now = datetime.now(UTC)
    for hours_ago, cost in ((5, "0.30"), (1, "0.20")):  # spent earlier today
        await record_call(
            database, tenant, task_id, Decimal(cost), at=now - timedelta(hours=hours_ago)
        )
    clock = Clock(0.0)
    decided: list[Grant | Refusal] = []
    halfway = asyncio.Event()

    async def calls(store: ResilientLimitStore) -> None:
        """Reserves a cent, spends it and records it, eight times."""
        for _ in range(8):
            call_id = uuid4()
            outcome = await store.acquire([cent], grant_id=str(call_id))
            decided.append(outcome)
            if len(decided) == 16:
                halfway.set()
            if isinstance(outcome, Grant):
                await store.settle(outcome, {key: CENT})
                await record_call(
                    database, tenant, task_id, Decimal("0.01"), correlation_id=call_id
                )

    try:
        async with private_redis() as server:
            history = WindowHistory(database)
            store = resilient(server.url, history, clock)

            async def kill() -> None:
                await halfway.wait()
                await server.kill()

            try:
                await asyncio.gather(*(calls(store) for _ in range(8)), kill())
                # Every acquisition was decided, none raised; the later ones without Redis.
                assert len(decided) == 64
                assert degraded(store)
                granted = sum(isinstance(outcome, Grant) for outcome in decided)
                assert granted == 50  # 0.50 recorded before + 50 cents: the limit, exactly

                await server.start()  # empty
                clock.now += 10  # past the backoff: the next operation tries Redis again
                refused = await store.acquire(
                    [LimitRequest(key, 1, limit, DAY, "cost_per_day_usd")]
                )
                assert not degraded(store)
                assert isinstance(refused, Refusal)  # the day's spend is back: nothing fits
                assert refused.used == limit
                client = Redis.from_url(server.url)
                try:  # decided by Redis, its window filled from the record
                    total = await client.hget(f"omniforge:windows:{key}:a", "~t")
                    assert total is not None
                    assert int(total) == limit
                finally:
                    await client.aclose()
            finally:
                await store.aclose()
    finally:
        await database.dispose()


class Relay:
    """A TCP relay to Redis the test can cut (connections reset, new ones refused) and mend,
    while Redis keeps its data: a network partition."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self._upstream = upstream_port
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def mend(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for link in list(self._links):
            link.cancel()
        await asyncio.gather(*self._links, return_exceptions=True)
        await self._server.wait_closed()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                end.transport.abort()
            self._links.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65_536):
        writer.write(data)
        await writer.drain()


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    async with private_redis() as server:
        relay = Relay(server.port)
        await relay.mend()
        yield relay
        await relay.cut()


async def test_a_cut_off_redis_gets_what_was_spent_without_it_once(
    relay: Relay, clock: Clock
) -> None:
    key = "t:cost_per_day_usd"
    limit = 1_000

    def cost(amount: int) -> LimitRequest:
        return LimitRequest(key, amount, limit, DAY, "cost_per_day_usd")

    record = Record()
    monotonic = Clock(0.0)
    redis = RedisLimitStore(relay.url, history=record, clock=clock)
    store = ResilientLimitStore(
        redis,
        RecordedWindows(record, clock=clock),
        history=record,
        clock=monotonic,
        wall_clock=clock,
    )
    try:
        first = await store.acquire([cost(10)], grant_id="g1")
        assert isinstance(first, Grant)
        await store.settle(first, {key: 10})
        record.add(key, PastEntry("g1", first.at, 10))

        await relay.cut()
        clock.now += 5
        second = await store.acquire([cost(10)], grant_id="g2")  # decided on the record
        assert isinstance(second, Grant)
        assert degraded(store)
        await store.settle(second, {key: 12})
        assert await store.usage(key, DAY) == 22
        # Another instance (since dead) spent 20 while Redis was away; g2 is recorded too.
        record.add(key, PastEntry("other", clock.now, 20))
        record.add(key, PastEntry("g2", second.at, 12))

        await relay.mend()
        monotonic.now += 0.1  # within the backoff: Redis is not asked yet
        third = await store.acquire([cost(1)], grant_id="g3")
        assert isinstance(third, Grant)
        assert degraded(store)

        monotonic.now += 1
        fourth = await store.acquire([cost(1)], grant_id="g4")
        assert isinstance(fourth, Grant)
        assert not degraded(store)
        # Redis now holds g1 (it kept), g2 (settled), other, g3 and g4: each once.
        assert await redis.usage(key, DAY) == 10 + 12 + 20 + 1 + 1
    finally:
        await store.aclose()


async def test_with_redis_and_the_record_away_admission_is_undecided_and_calls_go_ahead(
    clock: Clock,
) -> None:
    class Unreachable:
        async def __call__(self, since: Any) -> dict[str, list[PastEntry]]:
            raise LimitStoreUnavailable("the database is unavailable")

    store = resilient(f"redis://127.0.0.1:{free_port()}/0", Unreachable(), Clock(0.0))
    try:
        quotas = TenantQuotas.model_validate({"submissions_per_minute": 5, "cost_per_day_usd": "1"})
        with pytest.raises(LimitStoreUnavailable):
            await admit_submission(store, "acme", quotas)

        tool = PricedTool()
        executor = ToolExecutor(ToolRegistry([tool]), guards=[QuotaGuard(store, "acme", quotas)])
        chain = new_chain()
        await executor.execute(chain, context_for(chain), "priced", {})
        result = chain.steps[-1].tool_result
        assert result is not None
        assert result.success  # not failed for limits nobody can decide
    finally:
        await store.aclose()


class PricedTool(BaseTool):
    """An LLM-like tool with an estimate and a real cost."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(name="priced", type=ToolType.LLM, description="costs")

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput(
            "ok", model="m", input_tokens=10, output_tokens=0, cost_usd=Decimal("0.01")
        )

    async def estimate(self, arguments: dict[str, Any], context: ToolCallContext) -> CallEstimate:
        return CallEstimate(10, 0, Decimal("0.02"))


async def test_a_calls_reservation_is_held_under_the_id_its_cost_record_keeps(
    clock: Clock,
) -> None:
    record = Record()
    windows = RecordedWindows(record, clock=clock)
    quotas = TenantQuotas.model_validate({"cost_per_day_usd": "1"})
    executor = ToolExecutor(
        ToolRegistry([PricedTool()]), guards=[QuotaGuard(windows, "acme", quotas)]
    )
    chain = new_chain()
    await executor.execute(chain, context_for(chain), "priced", {})
    result = chain.steps[-1].tool_result
    assert result is not None
    key = "acme:cost_per_day_usd"
    assert await windows.usage(key, DAY) == CENT
    # Its cost record, read again from the record, is the same entry: counted once.
    record.add(key, PastEntry(str(result.correlation_id), clock.now, CENT))
    clock.now += 1
    assert await windows.usage(key, DAY) == CENT
