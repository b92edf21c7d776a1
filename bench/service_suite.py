"""The four service benchmarks, each on a fresh service, fake LLM servers and database; in quick
mode (a smoke run) all four share one service, since its start-up (~9 s, mostly importing
LiteLLM) would otherwise dominate. A benchmark may ask for settings of the service; the shared
one gets them all."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from bench import (
    service_chain_read,
    service_live_chains,
    service_sse_latency,
    service_throughput,
)
from bench.service_harness import PG_HOST, PG_USER, Stack, run_async, stack

Result = (
    service_sse_latency.SseLatency
    | service_live_chains.LiveChains
    | service_chain_read.ChainRead
    | service_throughput.Throughput
)


@dataclass(frozen=True)
class Plan:
    sse_tasks: int
    sse_subscribers: int
    sse_rate: float
    sse_delay_s: float
    live_tasks: int
    live_delay_s: float
    live_concurrency: int
    chain_requests: int
    e2e_tasks: int
    e2e_concurrency: int


FULL = Plan(
    sse_tasks=200,
    sse_subscribers=10,
    sse_rate=5.0,
    sse_delay_s=20.0,
    live_tasks=10_000,
    live_delay_s=60.0,
    live_concurrency=48,
    chain_requests=500,
    e2e_tasks=2000,
    e2e_concurrency=32,
)
QUICK = Plan(
    sse_tasks=30,
    sse_subscribers=10,
    sse_rate=10.0,
    sse_delay_s=2.0,
    live_tasks=400,
    live_delay_s=2.0,
    live_concurrency=48,
    chain_requests=50,
    e2e_tasks=200,
    e2e_concurrency=32,
)


@dataclass(frozen=True)
class Benchmark:
    llm_delays_s: list[float]  # one fake LLM server per delay
    measure: Callable[[Stack], Awaitable[Result]]
    settings: dict[str, str] = field(default_factory=dict)  # `OMNIFORGE_*` of the service


def _benchmarks(plan: Plan) -> list[Benchmark]:
    """The benchmarks in the order they run."""
    live_settings = service_live_chains.server_settings(
        plan.live_tasks, plan.live_delay_s, plan.live_concurrency
    )
    return [
        Benchmark(
            [plan.sse_delay_s, service_sse_latency.WARM_UP_DELAY_S],
            lambda s: service_sse_latency.measure(
                s, plan.sse_tasks, plan.sse_subscribers, plan.sse_rate, plan.sse_delay_s
            ),
        ),
        Benchmark(
            [plan.live_delay_s],
            lambda s: service_live_chains.measure(
                s, plan.live_tasks, plan.live_delay_s, plan.live_concurrency, live_settings
            ),
            live_settings,
        ),
        Benchmark([], lambda s: service_chain_read.measure(s, plan.chain_requests)),
        Benchmark(
            [service_throughput.DELAY_S],
            lambda s: service_throughput.measure(s, plan.e2e_tasks, plan.e2e_concurrency),
        ),
    ]


def database_description() -> str:
    async def describe() -> str:
        connection = await asyncpg.connect(host=PG_HOST, user=PG_USER, database="postgres")
        try:
            version = await connection.fetchval("SHOW server_version")
            fsync = await connection.fetchval("SHOW fsync")
            commit = await connection.fetchval("SHOW synchronous_commit")
        finally:
            await connection.close()
        return (
            f"Postgres {version.split()[0]} on {PG_HOST} (fsync={fsync}, "
            f"synchronous_commit={commit})"
        )

    return run_async(describe())


def run(quick: bool, report: Callable[[Result], None]) -> None:
    """Runs the benchmarks, handing each result to `report` as it comes."""
    plan = QUICK if quick else FULL

    async def main() -> None:
        benchmarks = _benchmarks(plan)
        if quick:
            delays = [delay for b in benchmarks for delay in b.llm_delays_s]
            settings = {name: v for b in benchmarks for name, v in b.settings.items()}
            async with stack(delays, **settings) as shared:
                for benchmark in benchmarks:
                    report(await benchmark.measure(shared))
        else:
            for benchmark in benchmarks:
                async with stack(benchmark.llm_delays_s, **benchmark.settings) as own:
                    report(await benchmark.measure(own))

    run_async(main())


def run_live(quick: bool) -> service_live_chains.LiveChains:
    """(b) alone, on a service of its own."""
    plan = QUICK if quick else FULL
    return service_live_chains.run(plan.live_tasks, plan.live_delay_s, plan.live_concurrency)
