"""SSE delivery latency, step created -> client received, with many concurrent streams.

Tasks are submitted at a steady `rate` (open loop); each has `subscribers` clients following
its stream (GET .../events, as many browser tabs or services would). The fake LLM answers each
call after `delay_s`, so a task stays live for about `delay_s` and its steps are spread out in
time: `rate * delay_s` tasks, `rate * delay_s * subscribers` streams are open in steady state.

Latency is the client's receive time (time.time(), when the event's blank line is read) minus
the step's `timestamp` (set by the server when the step object is created, same machine and
clock). It spans the run's write of the batch to Postgres (one transaction, commit included),
publishing, uvicorn, the socket and the client's parsing. Steps created before a subscriber's
stream was open (the first LLM call's tool_call step, usually) are replays, not deliveries:
they are counted apart. Figures are for the steady-state window, the events received while at
least 90% of the intended streams were open.
"""

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime

import aiohttp

from bench.service_harness import Stack, client, percentile, run_async, sse_events, stack

STEADY_FRACTION = 0.9
WARM_UP_DELAY_S = 0.0


@dataclass(frozen=True)
class SseLatency:
    tasks: int
    subscribers: int
    rate: float
    delay_s: float
    target_streams: int
    peak_streams: int
    window_s: float
    latencies_ms: list[float]  # live reasoning_step deliveries in the window
    window_events: int  # every SSE event received in the window
    all_latencies_ms: list[float]
    replayed_steps: int
    step_event_bytes: float  # mean size of a reasoning_step event's data
    failures: dict[str, int]
    server_cpu_s: float
    wall_s: float

    def p(self, q: float, *, window: bool = True) -> float:
        return percentile(self.latencies_ms if window else self.all_latencies_ms, q)

    @property
    def event_rate(self) -> float:
        return self.window_events / self.window_s if self.window_s else float("nan")

    @property
    def server_utilisation(self) -> float:
        return self.server_cpu_s / self.wall_s


@dataclass
class _Tally:
    target: int
    open: int = 0
    peak: int = 0
    window_start: float | None = None
    window_end: float = 0.0
    window_events: int = 0
    latencies: list[float] = field(default_factory=list)
    all_latencies: list[float] = field(default_factory=list)
    replayed: int = 0
    step_bytes: int = 0
    step_events: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def fail(self, what: str) -> None:
        self.failures[what] = self.failures.get(what, 0) + 1

    def steady(self, now: float) -> bool:
        if self.open < STEADY_FRACTION * self.target:
            return False
        if self.window_start is None:
            self.window_start = now
        self.window_end = now
        return True


async def _subscribe(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], tally: _Tally
) -> None:
    async with session.get(url, headers=headers) as response:
        if response.status != 200:
            tally.fail(f"GET HTTP {response.status}")
            return
        opened = time.time()
        tally.open += 1
        tally.peak = max(tally.peak, tally.open)
        try:
            async for event in sse_events(response):
                steady = tally.steady(event.received)
                tally.window_events += steady
                if event.type == "reasoning_step":
                    tally.step_bytes += len(event.data)
                    tally.step_events += 1
                    created = datetime.fromisoformat(json.loads(event.data)["step"]["timestamp"])
                    if created.timestamp() < opened:
                        tally.replayed += 1
                        continue
                    latency = (event.received - created.timestamp()) * 1000
                    tally.all_latencies.append(latency)
                    if steady:
                        tally.latencies.append(latency)
                elif event.type == "done":
                    if json.loads(event.data)["final_state"] != "completed":
                        tally.fail("task not completed")
                    return
            tally.fail("stream ended without done")
        finally:
            tally.open -= 1


async def _task(
    session: aiohttp.ClientSession, stack: Stack, model: str, subscribers: int, tally: _Tally
) -> None:
    headers = stack.headers()
    try:
        body = {"input": "Say ok.", "model": model}
        async with session.post(f"{stack.base_url}/api/v1/tasks", json=body, headers=headers) as r:
            if r.status != 202:
                tally.fail(f"POST HTTP {r.status}")
                return
            url = stack.base_url + (await r.json())["stream_url"]
        await asyncio.gather(
            *(_subscribe(session, url, headers, tally) for _ in range(subscribers))
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        tally.fail(type(exc).__name__)


async def measure(
    stack: Stack, tasks: int, subscribers: int, rate: float, delay_s: float
) -> SseLatency:
    model = stack.model_for(delay_s)
    # Warm-up (LiteLLM loads code on its first call with tools) on the instant model if any.
    warm_model = stack.model_for(WARM_UP_DELAY_S) if WARM_UP_DELAY_S in stack.llms else model
    target = round(rate * delay_s) * subscribers
    async with client() as session:
        warm = _Tally(target=10**9)
        await asyncio.gather(
            *(_task(session, stack, warm_model, subscribers, warm) for _ in range(5))
        )
        tally = _Tally(target=target)
        running: list[asyncio.Task[None]] = []
        cpu, wall = stack.service.cpu_s(), time.perf_counter()
        started = time.monotonic()
        for index in range(tasks):  # open loop: task i is submitted at started + i / rate
            await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
            running.append(asyncio.create_task(_task(session, stack, model, subscribers, tally)))
        await asyncio.gather(*running)
        cpu, wall = stack.service.cpu_s() - cpu, time.perf_counter() - wall
    return SseLatency(
        tasks=tasks,
        subscribers=subscribers,
        rate=rate,
        delay_s=delay_s,
        target_streams=target,
        peak_streams=tally.peak,
        window_s=tally.window_end - (tally.window_start or tally.window_end),
        latencies_ms=tally.latencies,
        window_events=tally.window_events,
        all_latencies_ms=tally.all_latencies,
        replayed_steps=tally.replayed,
        step_event_bytes=tally.step_bytes / max(1, tally.step_events),
        failures=tally.failures,
        server_cpu_s=cpu,
        wall_s=wall,
    )


def run(
    tasks: int = 200, subscribers: int = 10, rate: float = 5.0, delay_s: float = 20.0
) -> SseLatency:
    async def main() -> SseLatency:
        async with stack([delay_s, WARM_UP_DELAY_S]) as service:
            return await measure(service, tasks, subscribers, rate, delay_s)

    return run_async(main())
