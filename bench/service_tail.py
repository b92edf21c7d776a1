"""Completion latency under a burst of two-call tasks: its median and, above all, its tail.

Each of `clients` clients submits a task that makes two LLM calls with a calculator call between
them (the fake LLM answers a request without a tool result with `calculator` {"expression":
"6*7"}, and one with it with "ok"), follows its stream (GET, SSE) to `done`, and starts the next,
`rounds` times back to back; a first round of one task per client warms up and is not counted.
Completion latency is submit (POST sent) -> `done` received. Each task is also split in phases,
from the client's clock, the steps' own timestamps and the task's stored row (one host, one
clock): accepted (POST -> 202), queued (stored created_at -> started_at), first LLM call
(started -> the calculator call's step), tool (-> its result's step), second LLM call (-> stored
finished_at), delivery (finished_at -> `done` received); and the stream's opening (202 -> first
event received). CPU is read from /proc over the measured rounds for the service, the
database's Postgres backends, this client and the whole machine (which shows load from anything
else).
"""

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import aiohttp
import asyncpg

from bench.service_harness import (
    Stack,
    client,
    machine_cpu_s,
    percentile,
    postgres_cpu_s,
    run_async,
    sse_events,
    stack,
)

DELAY_S = 0.0
TOOL = "calculator"
LLM_ARGS = ("--tool-call", TOOL, "--tool-arguments", json.dumps({"expression": "6*7"}))
# The settings that bear on the tail, named with their defaults in the report.
SETTINGS = (
    "database_pool_size",
    "max_concurrent_runs",
    "max_concurrent_submissions",
    "llm_max_connections",
)
PHASES = ("accepted", "queued", "first_call", "tool", "second_call", "delivery", "stream_open")


@dataclass
class Sample:
    """One task's times (epoch seconds): received by the client, or stamped on its steps."""

    submitted: float
    accepted: float = 0.0
    first_event: float = 0.0
    tool_call_at: float = 0.0  # the calculator call's step: the first LLM call is done
    tool_result_at: float = 0.0
    done: float = 0.0
    task_id: str = ""
    outcome: str = ""

    @property
    def latency_ms(self) -> float:
        return (self.done - self.submitted) * 1000


@dataclass(frozen=True)
class Tail:
    clients: int
    rounds: int
    samples: list[Sample]
    wall_s: float
    server_cpu_s: float
    postgres_cpu_s: float
    client_cpu_s: float
    machine_cpu_s: float  # every process's, others' included
    settings: dict[str, str]
    # per task id: created_at, started_at, finished_at (epoch seconds, stored by the service)
    stored: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def completed(self) -> list[Sample]:
        return [s for s in self.samples if s.outcome == "completed"]

    @property
    def failures(self) -> Counter[str]:
        return Counter(s.outcome for s in self.samples if s.outcome != "completed")

    def p(self, q: float) -> float:
        return percentile([s.latency_ms for s in self.completed], q)

    @property
    def tasks_per_s(self) -> float:
        return len(self.completed) / self.wall_s

    def phases_ms(self, sample: Sample) -> dict[str, float]:
        """Where a task's time went."""
        created, started, finished = self.stored.get(sample.task_id, (0.0, 0.0, 0.0))
        return {
            "accepted": (sample.accepted - sample.submitted) * 1000,
            "queued": (started - created) * 1000,
            "first_call": (sample.tool_call_at - started) * 1000,
            "tool": (sample.tool_result_at - sample.tool_call_at) * 1000,
            "second_call": (finished - sample.tool_result_at) * 1000,
            "delivery": (sample.done - finished) * 1000,
            "stream_open": (sample.first_event - sample.accepted) * 1000,
        }

    def phase_table(self) -> list[tuple[str, float, float, float]]:
        """Per phase: its p50 over all tasks, its p50 over the slowest 1%, its max."""
        done = sorted(self.completed, key=lambda s: s.latency_ms)
        slow = done[-max(1, len(done) // 100) :]
        rows = []
        for phase in PHASES:
            values = [self.phases_ms(s)[phase] for s in done]
            slow_values = [self.phases_ms(s)[phase] for s in slow]
            rows.append((phase, percentile(values, 50), percentile(slow_values, 50), max(values)))
        return rows


async def _one_task(session: aiohttp.ClientSession, stack: Stack, model: str) -> Sample:
    headers = stack.headers()
    body = {"input": "What is 6*7?", "model": model, "tools": [TOOL]}
    sample = Sample(time.time())
    try:
        url = f"{stack.base_url}/api/v1/tasks"
        async with session.post(url, json=body, headers=headers) as response:
            if response.status != 202:
                sample.outcome = f"HTTP {response.status}"
                return sample
            accepted = await response.json()
        sample.accepted, sample.task_id = time.time(), str(accepted["task_id"])
        async with session.get(stack.base_url + accepted["stream_url"], headers=headers) as r:
            if r.status != 200:
                sample.outcome = f"stream HTTP {r.status}"
                return sample
            async for event in sse_events(r):
                sample.first_event = sample.first_event or event.received
                if event.type == "reasoning_step":
                    step = json.loads(event.data)["step"]
                    at = datetime.fromisoformat(step["timestamp"]).timestamp()
                    if step["type"] == "tool_call" and step["tool_call"]["tool_name"] == TOOL:
                        sample.tool_call_at = at
                    elif step["type"] == "tool_result" and sample.tool_call_at:
                        sample.tool_result_at = sample.tool_result_at or at
                elif event.type == "done":
                    sample.done = event.received
                    sample.outcome = str(json.loads(event.data)["final_state"])
                    return sample
        sample.outcome = "stream ended without done"
    except Exception as exc:
        sample.outcome = f"{type(exc).__name__}: {exc}"
    return sample


async def _stored_times(stack: Stack, task_ids: list[str]) -> dict[str, tuple[float, float, float]]:
    dsn = stack.database_url.replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT id::text, created_at, started_at, finished_at FROM tasks"
            " WHERE id::text = ANY($1::text[])",
            task_ids,
        )
    finally:
        await connection.close()
    return {
        row["id"]: tuple(  # type: ignore[misc]
            t.timestamp() if t is not None else 0.0
            for t in (row["created_at"], row["started_at"], row["finished_at"])
        )
        for row in rows
    }


async def measure(
    stack: Stack, clients: int, rounds: int, settings: dict[str, str] | None = None
) -> Tail:
    model = stack.model_for(DELAY_S)
    async with client() as session:
        warm = await asyncio.gather(*(_one_task(session, stack, model) for _ in range(clients)))
        if not any(s.outcome == "completed" for s in warm):
            raise RuntimeError(f"no warm-up task completed: {Counter(s.outcome for s in warm)}")
        samples: list[Sample] = []

        async def one_client() -> None:
            for _ in range(rounds):
                samples.append(await _one_task(session, stack, model))

        database = stack.database_url.rsplit("/", 1)[1]
        cpu, pg_cpu, wall = stack.service.cpu_s(), postgres_cpu_s(database), time.perf_counter()
        client_cpu, machine_cpu = time.process_time(), machine_cpu_s()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - wall
        cpu, pg_cpu = stack.service.cpu_s() - cpu, postgres_cpu_s(database) - pg_cpu
        client_cpu, machine_cpu = time.process_time() - client_cpu, machine_cpu_s() - machine_cpu
    stored = await _stored_times(stack, [s.task_id for s in samples if s.task_id])
    return Tail(
        clients,
        rounds,
        samples,
        wall,
        cpu,
        pg_cpu,
        client_cpu,
        machine_cpu,
        settings or {},
        stored,
    )


def run(clients: int = 256, rounds: int = 4, **settings: str) -> Tail:
    async def main() -> Tail:
        async with stack([DELAY_S], llm_args=LLM_ARGS, **settings) as service:
            return await measure(service, clients, rounds, settings)

    return run_async(main())
