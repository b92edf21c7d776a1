"""Concurrent live chains on one instance, the fake LLM answering each call after `delay_s`.

`tasks` tasks are submitted as fast as the service accepts them (`concurrency` POSTs in flight),
without following their streams; then every task's stream is read to `done` (replayed from the
store when it has ended, followed live otherwise) to check its final state. A chain is live
from the task's `created_at` to its `finished_at`, as the service stored them: the peak of live
chains is the largest overlap of those intervals. The server's resident memory (VmRSS) is read
every 50 ms; RSS per live chain is (peak RSS - RSS before) / peak live chains.

The service's own `/metrics` is read every second: its gauge of active runs, and its histogram
of event-loop lag (a timer the server arms every 100 ms, and how late it fires). The plateau is
the span over which the server held at least 90% of its most active runs; the lag quantiles
are those of the samples taken within it, interpolated within buckets as Prometheus'
`histogram_quantile` does. The service is given what holding every task at once takes: as many
runs, a connection per LLM call, requests allowed to last the delay.
"""

import argparse
import asyncio
import contextlib
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import aiohttp
import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from bench.service_harness import (
    PG_HOST,
    PG_USER,
    Stack,
    client,
    follow,
    llm_stats,
    run_async,
    stack,
)

SAMPLE_EVERY_S = 0.05
SCRAPE_EVERY_S = 1.0
PLATEAU_SHARE = 0.9
LAG = "omniforge_event_loop_lag_seconds"

Window = Literal["plateau", "submit", "whole"]


@dataclass(frozen=True, slots=True)
class Scrape:
    """One reading of the service's /metrics."""

    at: float  # seconds since the measured submissions began
    active_runs: int
    lag_buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative samples)
    open_files: int


@dataclass(frozen=True)
class LiveChains:
    tasks: int
    delay_s: float
    concurrency: int
    submit_s: float
    wall_s: float
    outcomes: dict[str, int]  # final state (or error) -> tasks
    peak_live: int
    failure_reasons: dict[str, int]  # stored status, error code and message -> tasks
    peak_llm_in_flight: int
    llm_calls: int
    rss_before_mb: float
    rss_peak_mb: float
    server_problems: list[str]
    settings: dict[str, str] = field(default_factory=dict)
    submit_cpu_s: float = 0.0  # the server's CPU time while the tasks were submitted
    scrapes: list[Scrape] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return self.outcomes.get("completed", 0)

    @property
    def errors(self) -> int:
        return self.tasks - self.completed

    @property
    def submit_rate(self) -> float:
        return self.tasks / self.submit_s

    @property
    def rss_per_chain_kb(self) -> float:
        return (self.rss_peak_mb - self.rss_before_mb) * 1024 / max(1, self.peak_live)

    @property
    def submit_utilisation(self) -> float:
        """Server CPU over the submissions, in cores."""
        return self.submit_cpu_s / self.submit_s

    @property
    def peak_active_runs(self) -> int:
        return max((s.active_runs for s in self.scrapes), default=0)

    @property
    def peak_open_files(self) -> int:
        return max((s.open_files for s in self.scrapes), default=0)

    def plateau(self) -> tuple[Scrape, Scrape] | None:
        """The first and last readings with at least PLATEAU_SHARE of the peak of active runs."""
        floor = PLATEAU_SHARE * self.peak_active_runs
        held = [s for s in self.scrapes if s.active_runs >= floor]
        return (held[0], held[-1]) if len(held) >= 2 else None

    def lag_ms(self, q: float, window: Window = "plateau") -> float:
        """Quantile `q` (0-100) of the server's loop lag in ms over `window`: the plateau, the
        submissions, or the whole measurement; NaN without samples."""
        span = self._span(window)
        if span is None:
            return math.nan
        return histogram_quantile(q / 100, span[0].lag_buckets, span[1].lag_buckets) * 1000

    def lag_samples(self, window: Window = "plateau") -> int:
        span = self._span(window)
        return 0 if span is None else round(span[1].lag_buckets[-1][1] - span[0].lag_buckets[-1][1])

    def problem_counts(self) -> Counter[str]:
        """The server's stderr messages (tracebacks' frames left out) by text, digits and ids
        masked."""
        return Counter(
            re.sub(r"[0-9a-f-]{36}|[0-9]+", "N", line)
            for line in self.server_problems
            if not line.startswith((" ", "Traceback", "The above exception", "During handling"))
        )

    def _span(self, window: Window) -> tuple[Scrape, Scrape] | None:
        if window == "plateau":
            return self.plateau()
        scrapes = self.scrapes
        if window == "submit":
            scrapes = [s for s in scrapes if s.at <= self.submit_s + SCRAPE_EVERY_S]
        return (scrapes[0], scrapes[-1]) if len(scrapes) >= 2 else None


def histogram_quantile(
    q: float,
    before: tuple[tuple[float, float], ...],
    after: tuple[tuple[float, float], ...],
) -> float:
    """Quantile `q` (0-1) of the samples a cumulative histogram gained between two readings,
    interpolated linearly within the bucket that holds it (from 0 for the first); a quantile in
    the +Inf bucket is the largest finite bound. NaN without samples."""
    counts = [(bound, now - then) for (bound, now), (_, then) in zip(after, before, strict=True)]
    total = counts[-1][1]
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in counts:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


async def _scrape(session: aiohttp.ClientSession, stack: Stack, started: float) -> Scrape:
    async with session.get(f"{stack.base_url}/metrics") as response:
        text = await response.text()
    active, buckets = 0, []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "omniforge_active_runs":
                active = int(sample.value)
            elif sample.name == f"{LAG}_bucket":
                buckets.append((float(sample.labels["le"]), sample.value))
    if not buckets:
        raise RuntimeError(f"the service's /metrics has no {LAG}")
    at = time.perf_counter() - started
    return Scrape(at, active, tuple(sorted(buckets)), stack.service.open_files())


def server_settings(tasks: int, delay_s: float, concurrency: int) -> dict[str, str]:
    """What the service needs to hold `tasks` runs at once, each waiting `delay_s` for its
    model: as many runs, a connection per LLM call, requests allowed to last the delay."""
    at_once = str(tasks + concurrency)
    return {
        "OMNIFORGE_MAX_CONCURRENT_RUNS": at_once,
        "OMNIFORGE_LLM_MAX_CONNECTIONS": at_once,
        "OMNIFORGE_LLM_REQUEST_TIMEOUT_S": f"{delay_s + 60:g}",
        "OMNIFORGE_LLM_TIMEOUT_S": f"{delay_s + 120:g}",
    }


async def _submit(
    session: aiohttp.ClientSession, stack: Stack, model: str, count: int, concurrency: int
) -> tuple[list[str], Counter[str]]:
    url, headers = f"{stack.base_url}/api/v1/tasks", stack.headers()
    ids: list[str] = []
    errors: Counter[str] = Counter()
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            try:
                body = {"input": "Say ok.", "model": model}
                async with session.post(url, json=body, headers=headers) as response:
                    if response.status == 202:
                        ids.append((await response.json())["task_id"])
                    else:
                        errors[f"POST HTTP {response.status}"] += 1
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors[f"POST {type(exc).__name__}"] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ids, errors


async def _finish(
    session: aiohttp.ClientSession, stack: Stack, ids: list[str], concurrency: int
) -> Counter[str]:
    headers = stack.headers()
    outcomes: Counter[str] = Counter()
    pending = iter(ids)

    async def worker() -> None:
        for task_id in pending:
            url = f"{stack.base_url}/api/v1/tasks/{task_id}/events"
            try:
                outcomes[await follow(session, url, headers)] += 1
            except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
                outcomes[f"stream {type(exc).__name__}"] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


async def stored_runs(database_url: str) -> tuple[int, dict[str, int]]:
    """The most tasks unfinished at the same moment, from the stored times; and why tasks
    did not complete (error code and message, digits masked)."""
    name = database_url.rsplit("/", 1)[1]
    connection = await asyncpg.connect(host=PG_HOST, user=PG_USER, database=name)
    try:
        rows = await connection.fetch("SELECT created_at, finished_at FROM tasks")
        reasons = await connection.fetch(
            "SELECT status || ' ' || coalesce(error_code, '') || ': '"
            " || left(regexp_replace(coalesce(error_message, ''), '[0-9][0-9.]*', 'N', 'g'), 160)"
            " AS reason, count(*) FROM tasks WHERE status <> 'completed' GROUP BY 1 ORDER BY 2 DESC"
        )
    finally:
        await connection.close()
    moments = [(row["created_at"], 1) for row in rows]
    moments += [(row["finished_at"], -1) for row in rows if row["finished_at"] is not None]
    live = peak = 0
    for _moment, change in sorted(moments):  # an end sorts before a start at the same moment
        live += change
        peak = max(peak, live)
    return peak, {row["reason"]: row["count"] for row in reasons}


async def measure(
    stack: Stack,
    tasks: int,
    delay_s: float = 2.0,
    concurrency: int = 48,
    settings: dict[str, str] | None = None,
) -> LiveChains:
    model, llm = stack.model_for(delay_s), stack.llms[delay_s]
    async with client() as session:
        warm_ids, _ = await _submit(session, stack, model, concurrency, concurrency)
        await _finish(session, stack, warm_ids, concurrency)
        before_stats = await llm_stats(llm)
        problems_before = len(stack.service.problems())
        rss_before = rss_peak = stack.service.rss_mb()
        scrapes: list[Scrape] = []
        started = time.perf_counter()

        async def sample() -> None:
            nonlocal rss_peak
            while True:
                rss_peak = max(rss_peak, stack.service.rss_mb())
                await asyncio.sleep(SAMPLE_EVERY_S)

        async def scrape() -> None:
            while True:
                scrapes.append(await _scrape(session, stack, started))
                await asyncio.sleep(SCRAPE_EVERY_S)

        samplers = [asyncio.create_task(sample()), asyncio.create_task(scrape())]
        cpu_before = stack.service.cpu_s()
        ids, errors = await _submit(session, stack, model, tasks, concurrency)
        submit_s = time.perf_counter() - started
        submit_cpu_s = stack.service.cpu_s() - cpu_before
        outcomes = errors + await _finish(session, stack, ids, concurrency)
        wall_s = time.perf_counter() - started
        for sampler in samplers:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        scrapes.append(await _scrape(session, stack, started))
        stats = await llm_stats(llm)
    peak, reasons = await stored_runs(stack.database_url)
    return LiveChains(
        tasks=tasks,
        delay_s=delay_s,
        concurrency=concurrency,
        submit_s=submit_s,
        wall_s=wall_s,
        outcomes=dict(outcomes),
        peak_live=peak,
        failure_reasons=reasons,
        peak_llm_in_flight=stats["peak"],
        llm_calls=stats["calls"] - before_stats["calls"],
        rss_before_mb=rss_before,
        rss_peak_mb=rss_peak,
        server_problems=stack.service.problems()[problems_before:],
        settings=settings or {},
        submit_cpu_s=submit_cpu_s,
        scrapes=scrapes,
    )


def run(
    tasks: int = 10_000,
    delay_s: float = 60.0,
    concurrency: int = 48,
    settings: dict[str, str] | None = None,
) -> LiveChains:
    """(b) on a service of its own; `settings` override those of server_settings()."""
    chosen = {**server_settings(tasks, delay_s, concurrency), **(settings or {})}

    async def main() -> LiveChains:
        async with stack([delay_s], **chosen) as service:
            return await measure(service, tasks, delay_s, concurrency, chosen)

    return run_async(main())


if __name__ == "__main__":  # other conditions than scripts/bench's, e.g. --delay-s 120
    parser = argparse.ArgumentParser(prog="python -m bench.service_live_chains")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--delay-s", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=48)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="OMNIFORGE_NAME=VALUE",
        help="a setting of the service (e.g. OMNIFORGE_LLM_MAX_CONNECTIONS=500)",
    )
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    result = run(args.tasks, args.delay_s, args.concurrency, overrides)
    for name, value in vars(result).items():
        if name != "scrapes":
            print(f"{name}: {value[:5] if isinstance(value, list) else value}")
    print(
        f"submit_rate: {result.submit_rate:.1f}/s  rss_per_chain: {result.rss_per_chain_kb:.0f} KB"
        f"  server CPU while submitting: {result.submit_utilisation:.2f} cores\n"
        f"peak active runs (gauge) {result.peak_active_runs}, peak open files"
        f" {result.peak_open_files}\n"
        f"loop lag p50/p99 ms: plateau ({result.lag_samples()} samples)"
        f" {result.lag_ms(50):.1f}/{result.lag_ms(99):.1f}; submissions"
        f" ({result.lag_samples('submit')}) {result.lag_ms(50, 'submit'):.1f}/"
        f"{result.lag_ms(99, 'submit'):.1f}; whole run ({result.lag_samples('whole')})"
        f" {result.lag_ms(50, 'whole'):.1f}/{result.lag_ms(99, 'whole'):.1f}"
    )
    for problem, count in result.problem_counts().most_common():
        print(f"  server stderr x{count}: {problem[:200]}")
    previous = result.scrapes[0]
    for reading in result.scrapes[1:]:
        p99 = histogram_quantile(0.99, previous.lag_buckets, reading.lag_buckets) * 1000
        print(
            f"  t={reading.at:6.1f} s  active {reading.active_runs:6d}  fds {reading.open_files}"
            f"  lag p99 {p99:6.1f} ms"
        )
        previous = reading
