"""End-to-end throughput through the whole service: tasks/s and LLM calls per server CPU-second.

Each of `concurrency` clients submits a task (POST, 202), follows its stream (GET, SSE) to
`done`, and starts the next. The fake LLM answers at once with plain text, so every task is one
LLM call and three steps (llm tool_call, tool_result, synthesis), persisted and streamed. CPU
is the server process's user + system time (/proc/<pid>/stat) over the measured tasks only.
"""

import asyncio
import time
from dataclasses import dataclass

import aiohttp

from bench.service_harness import Stack, client, follow, llm_stats, run_async, stack

DELAY_S = 0.0


@dataclass(frozen=True)
class Throughput:
    tasks: int
    concurrency: int
    completed: int
    failures: int
    wall_s: float
    server_cpu_s: float
    llm_calls: int
    client_cpu_s: float
    server_problems: int

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.wall_s

    @property
    def llm_calls_per_cpu_s(self) -> float:
        return self.llm_calls / self.server_cpu_s

    @property
    def server_cpu_ms_per_task(self) -> float:
        return self.server_cpu_s * 1000 / self.tasks

    @property
    def server_utilisation(self) -> float:
        return self.server_cpu_s / self.wall_s


async def _one_task(session: aiohttp.ClientSession, stack: Stack, model: str) -> str:
    """Submits a task and follows it to `done`; returns its final state (or the HTTP error)."""
    headers = stack.headers()
    url = f"{stack.base_url}/api/v1/tasks"
    async with session.post(url, json={"input": "Say ok.", "model": model}, headers=headers) as r:
        if r.status != 202:
            return f"HTTP {r.status}"
        accepted = await r.json()
    return await follow(session, stack.base_url + accepted["stream_url"], headers)


async def measure(stack: Stack, tasks: int, concurrency: int = 32) -> Throughput:
    model = stack.model_for(DELAY_S)
    llm = stack.llms[DELAY_S]
    async with client() as session:
        await asyncio.gather(*(_one_task(session, stack, model) for _ in range(concurrency)))
        outcomes: list[str] = []
        remaining = tasks

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                try:
                    outcomes.append(await _one_task(session, stack, model))
                except Exception as exc:
                    outcomes.append(f"{type(exc).__name__}: {exc}")

        calls_before = (await llm_stats(llm))["calls"]
        problems_before = len(stack.service.problems())
        cpu, client_cpu, wall = stack.service.cpu_s(), time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - wall
        cpu = stack.service.cpu_s() - cpu
        client_cpu = time.process_time() - client_cpu
        calls = (await llm_stats(llm))["calls"] - calls_before
    completed = outcomes.count("completed")
    return Throughput(
        tasks=tasks,
        concurrency=concurrency,
        completed=completed,
        failures=len(outcomes) - completed,
        wall_s=wall,
        server_cpu_s=cpu,
        llm_calls=calls,
        client_cpu_s=client_cpu,
        server_problems=len(stack.service.problems()) - problems_before,
    )


def run(tasks: int = 2000, concurrency: int = 32) -> Throughput:
    async def main() -> Throughput:
        async with stack([DELAY_S]) as service:
            return await measure(service, tasks, concurrency)

    return run_async(main())
