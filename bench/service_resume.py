"""Resume latency: how long after its instance stops a run goes on on another instance.

Two instances of the service, A and B, share one database. `tasks` tasks are submitted to A,
which runs each itself (a submission is claimed as it is stored by an instance with room; both
have room for all, and the task rows are checked to name A's runner), and each waits in an LLM
call the fake LLM holds `delay_s`. Every task's stream is followed on B. Once all calls are in
flight, A is stopped and each task's time from the signal to its first `task_status` event with
`resumed: true` is read on B's stream, then the stream is read to `done`.

Round one SIGKILLs A: B finds A's pid gone at its next lease check (every runner heartbeat) and
puts A's runs back in the queue, then claims them. Round two starts a fresh A and SIGTERMs it:
it drains and hands its runs back at once, with no lease to wait for.
"""

import asyncio
import json
import signal
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg

from app.config import Settings
from bench.service_harness import (
    Proc,
    Stack,
    client,
    fake_llms,
    llm_stats,
    percentile,
    postgres_database,
    run_async,
    service_env,
    sse_events,
    start_service,
)

GRACE_S = 2.0  # the harness's OMNIFORGE_SHUTDOWN_GRACE_S
_SETTLE_TIMEOUT_S = 60


@dataclass
class Round:
    signal: str
    resume_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    all_done_s: float = float("nan")

    @property
    def completed(self) -> int:
        return self.outcomes["completed"]

    def p(self, q: float) -> float:
        return percentile(self.resume_ms, q)


@dataclass(frozen=True)
class Resume:
    tasks: int
    delay_s: float
    heartbeat_s: float
    grace_s: float
    rounds: list[Round]


@dataclass
class _Followed:
    """One task's stream on B: when `resumed` came, and how it ended."""

    resumed_at: float = 0.0
    outcome: str = "stream not ended"


async def _follow(
    session: aiohttp.ClientSession, stack: Stack, task_id: str, into: _Followed
) -> None:
    url = f"{stack.base_url}/api/v1/tasks/{task_id}/events"
    try:
        async with session.get(url, headers=stack.headers()) as response:
            if response.status != 200:
                into.outcome = f"stream HTTP {response.status}"
                return
            async for event in sse_events(response):
                if event.type == "task_status" and json.loads(event.data).get("resumed"):
                    into.resumed_at = into.resumed_at or event.received
                elif event.type == "done":
                    into.outcome = str(json.loads(event.data)["final_state"])
                    return
    except Exception as exc:
        into.outcome = f"{type(exc).__name__}: {exc}"


async def _submit(session: aiohttp.ClientSession, stack: Stack, count: int) -> list[str]:
    async def one() -> str:
        body = {"input": "Say ok.", "model": stack.model_for(next(iter(stack.llms)))}
        url = f"{stack.base_url}/api/v1/tasks"
        async with session.post(url, json=body, headers=stack.headers()) as response:
            if response.status != 202:
                raise RuntimeError(f"POST {url}: HTTP {response.status}: {await response.text()}")
            return str((await response.json())["task_id"])

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _runners(database_url: str, task_ids: list[str]) -> Counter[int | None]:
    """The pid of the process whose runner holds each task."""
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT r.pid FROM tasks t LEFT JOIN runners r ON r.id = t.runner_id"
            " WHERE t.id::text = ANY($1::text[])",
            task_ids,
        )
    finally:
        await connection.close()
    return Counter(row["pid"] for row in rows)


async def _in_flight(llm: Proc, count: int) -> None:
    """Returns once `count` LLM calls are in flight (polled: the fake server is another
    process, and says so only when asked)."""
    deadline = time.monotonic() + _SETTLE_TIMEOUT_S
    while (await llm_stats(llm))["in_flight"] < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} LLM calls were never in flight at once")
        await asyncio.sleep(0.05)


async def _round(
    session: aiohttp.ClientSession, a: Stack, b: Stack, tasks: int, sig: signal.Signals
) -> Round:
    llm = next(iter(a.llms.values()))
    task_ids = await _submit(session, a, tasks)
    followed = {task_id: _Followed() for task_id in task_ids}
    streams = [
        asyncio.create_task(_follow(session, b, task_id, into))
        for task_id, into in followed.items()
    ]
    await _in_flight(llm, tasks)
    runners = await _runners(a.database_url, task_ids)
    if runners != Counter({a.service.pid: tasks}):
        raise RuntimeError(f"not every task runs on A (pid {a.service.pid}): {runners}")
    stopped = time.time()
    a.service.process.send_signal(sig)
    await asyncio.gather(*streams, a.service.process.wait())
    result = Round(sig.name, all_done_s=time.time() - stopped)
    for into in followed.values():
        result.outcomes[into.outcome] += 1
        if into.resumed_at:
            result.resume_ms.append((into.resumed_at - stopped) * 1000)
    return result


async def measure(tasks: int, delay_s: float, **settings: str) -> Resume:
    with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
        directory = Path(tmp)
        async with postgres_database() as url, AsyncExitStack() as processes, client() as session:
            llms = await fake_llms(processes, directory, [delay_s])
            env = service_env(directory, url, llms, **settings)
            b = Stack(
                await processes.enter_async_context(start_service(directory, env, "b")), llms, url
            )
            rounds = []
            for n, sig in enumerate((signal.SIGKILL, signal.SIGTERM)):
                async with start_service(directory, env, f"a{n}") as service:
                    rounds.append(await _round(session, Stack(service, llms, url), b, tasks, sig))
    heartbeat = float(settings.get("OMNIFORGE_RUNNER_HEARTBEAT_S", _default("runner_heartbeat_s")))
    return Resume(tasks, delay_s, heartbeat, GRACE_S, rounds)


def _default(name: str) -> float:
    return float(Settings.model_fields[name].default)


def run(tasks: int = 20, delay_s: float = 10.0, **settings: str) -> Resume:
    return run_async(measure(tasks, delay_s, **settings))
