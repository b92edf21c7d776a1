"""Concurrent live chains on one instance, the fake LLM answering each call after `delay_s`.

`tasks` tasks are submitted as fast as the service accepts them (`concurrency` POSTs in flight),
without following their streams; then every task's stream is read to `done` (replayed from the
store when it has ended, followed live otherwise) to check its final state. A chain is live
from the task's `created_at` to its `finished_at`, as the service stored them: the peak of live
chains is the largest overlap of those intervals. The server's resident memory (VmRSS) is read
every 50 ms; RSS per live chain is (peak RSS - RSS before) / peak live chains.
"""

import argparse
import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass

import aiohttp
import asyncpg  # type: ignore[import-untyped]

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
    stack: Stack, tasks: int, delay_s: float = 2.0, concurrency: int = 48
) -> LiveChains:
    model, llm = stack.model_for(delay_s), stack.llms[delay_s]
    async with client() as session:
        warm_ids, _ = await _submit(session, stack, model, concurrency, concurrency)
        await _finish(session, stack, warm_ids, concurrency)
        before_stats = await llm_stats(llm)
        problems_before = len(stack.service.problems())
        rss_before = rss_peak = stack.service.rss_mb()

        async def sample() -> None:
            nonlocal rss_peak
            while True:
                rss_peak = max(rss_peak, stack.service.rss_mb())
                await asyncio.sleep(SAMPLE_EVERY_S)

        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        ids, errors = await _submit(session, stack, model, tasks, concurrency)
        submit_s = time.perf_counter() - started
        outcomes = errors + await _finish(session, stack, ids, concurrency)
        wall_s = time.perf_counter() - started
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
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
    )


def run(tasks: int = 10_000, delay_s: float = 2.0, concurrency: int = 48) -> LiveChains:
    async def main() -> LiveChains:
        async with stack([delay_s]) as service:
            return await measure(service, tasks, delay_s, concurrency)

    return run_async(main())


if __name__ == "__main__":  # other conditions than scripts/bench's, e.g. --delay-s 50
    parser = argparse.ArgumentParser(prog="python -m bench.service_live_chains")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--delay-s", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=48)
    args = parser.parse_args()
    result = run(args.tasks, args.delay_s, args.concurrency)
    for name, value in vars(result).items():
        print(f"{name}: {value[:5] if isinstance(value, list) else value}")
    print(
        f"submit_rate: {result.submit_rate:.1f}/s  rss_per_chain: {result.rss_per_chain_kb:.0f} KB"
    )
