"""What a local sub-agent call costs the service in CPU, beyond the LLM calls it makes.

A real service (its own process, Postgres) runs tasks of four agents, one at a time and then
several at once, each over its stream (`POST /api/v1/tasks` with `Accept: text/event-stream`,
read to `done`). A
scripted fake LLM server in a process of its own answers at once, each agent's model by the
tool results its request already holds:

- `delegating`: `lead` calls `agent__worker`; the child task of `worker` answers in one LLM
  call; `lead` answers. 3 LLM calls, 1 tool call (the sub-agent's), 2 tasks.
- `three_calls`: a calculator call, another, then the answer. 3 LLM calls, 2 tool calls.
- `pair`: two calculator calls in one turn, then the answer. 2 LLM calls, 2 tool calls.
- `one_tool`: a calculator call, then the answer. 2 LLM calls, 1 tool call.

A ReAct task with one tool call makes two LLM calls, so no single task without delegation
matches `delegating` call for call. The differences do: `three_calls` - `pair` is what one
more LLM call (and its turn) costs, `pair` - `one_tool` what one more calculator call costs,
and what delegation adds over a plain tool call is `delegating` - `one_tool` - one LLM call:
the child's task and chain stored, its run started, its steps stored and relayed on the
parent's stream, its answer read back as the parent's observation.

CPU is the service process's user + system time (/proc/<pid>/stat) over the measured tasks;
the fake LLM's own CPU is not in it (another process). The CPU of the database's Postgres
backends is shown apart when the tasks run one at a time: with more at once the service's
pool opens and closes overflow connections, and a closed backend's CPU can no longer be read.
The workloads are interleaved in rounds (order rotated) so that drift on the machine touches
them alike; the whole machine's busy time is read too, which shows load from anything else.

`python -m bench.sub_agent_overhead` serves the scripted fake LLM: prints `READY <base_url>`,
answers until SIGTERM, and on SIGUSR1 prints `STATS calls=<n>`.
"""

import asyncio
import signal
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import yaml

from app.security import mint_token
from bench.service_harness import (
    JWT_SECRET,
    PG_HOST,
    PG_USER,
    TENANT,
    Proc,
    Stack,
    child,
    client,
    llm_stats,
    machine_cpu_s,
    percentile,
    postgres_cpu_s,
    postgres_database,
    run_async,
    service_env,
    sse_events,
    start_service,
)
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

_CALCULATOR = ToolCall("calculator", {"expression": "6*7"})
# By model: the tool calls of each turn; once a request holds all their results, "ok".
_SCRIPTS: dict[str, tuple[tuple[ToolCall, ...], ...]] = {
    "bench-lead": ((ToolCall("agent__worker", {"task": "Say ok."}),),),
    "bench-worker": (),
    "bench-three-calls": ((_CALCULATOR,), (_CALCULATOR,)),
    "bench-pair": ((_CALCULATOR, _CALCULATOR),),
    "bench-one-tool": ((_CALCULATOR,),),
}
_ANSWER = Reply.text("ok")


@dataclass(frozen=True)
class Workload:
    name: str
    agent: str
    llm_calls: int
    tasks_per_run: int  # the parent and its children


WORKLOADS = (
    Workload("delegating", "lead", llm_calls=3, tasks_per_run=2),
    Workload("three_calls", "three-calls", llm_calls=3, tasks_per_run=1),
    Workload("pair", "pair", llm_calls=2, tasks_per_run=1),
    Workload("one_tool", "one-tool", llm_calls=2, tasks_per_run=1),
)
_AGENTS: dict[str, dict[str, Any]] = {
    "worker": {"model": "bench-worker", "tools": []},
    "lead": {"model": "bench-lead", "tools": ["agent:worker"]},
    "three-calls": {"model": "bench-three-calls", "tools": ["calculator"]},
    "pair": {"model": "bench-pair", "tools": ["calculator"]},
    "one-tool": {"model": "bench-one-tool", "tools": ["calculator"]},
}
WARM_UP = 20


@dataclass
class Series:
    """One workload's measured tasks."""

    workload: Workload
    latencies_ms: list[float] = field(default_factory=list)
    server_cpu_s: float = 0.0
    postgres_cpu_s: float = 0.0
    llm_calls: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> int:
        return len(self.latencies_ms)

    @property
    def cpu_ms(self) -> float:
        """Service CPU per task."""
        return self.server_cpu_s * 1000 / self.tasks

    @property
    def postgres_ms(self) -> float:
        return self.postgres_cpu_s * 1000 / self.tasks

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


@dataclass(frozen=True)
class SubAgentOverhead:
    concurrency: int
    rounds: int
    series: dict[str, Series]
    children: int  # child tasks stored, as counted in the database
    server_problems: list[str]
    wall_s: float
    machine_cpu_s: float  # every process's, others' included
    service_cpu_s: float
    bench_cpu_s: float  # the fake LLM's and the client's

    @property
    def postgres_counted(self) -> bool:
        return self.concurrency == 1

    def per_task(self, name: str, what: str = "cpu_ms") -> float:
        """A series' figure per task: `cpu_ms` (the service's) or `postgres_ms`."""
        value: float = getattr(self.series[name], what)
        return value

    def llm_call(self, what: str = "cpu_ms") -> float:
        """What one more LLM call (and its turn) costs."""
        return self.per_task("three_calls", what) - self.per_task("pair", what)

    def tool_call(self, what: str = "cpu_ms") -> float:
        """What one more calculator call costs."""
        return self.per_task("pair", what) - self.per_task("one_tool", what)

    def added(self, what: str = "cpu_ms") -> float:
        """What a sub-agent call adds over a plain tool call, its child's LLM call left out."""
        return (
            self.per_task("delegating", what)
            - self.per_task("one_tool", what)
            - self.llm_call(what)
        )

    def added_latency_ms(self, q: float) -> float:
        """Latency over `three_calls` (as many LLM calls, one tool call more)."""
        return self.series["delegating"].p(q) - self.series["three_calls"].p(q)

    @property
    def failures(self) -> list[str]:
        return [failure for series in self.series.values() for failure in series.failures]


class _ScriptedLLM(FakeLLMServer):
    """Answers each model of `_SCRIPTS` by the tool results its request holds; counts calls."""

    def __init__(self) -> None:
        super().__init__(record_requests=False)
        self.calls = 0

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        self.calls += 1
        script = _SCRIPTS.get(model)
        if script is None:
            return None
        messages = body.get("messages") or []
        answered = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
        for calls in script:
            if answered < len(calls):
                return Reply.tool_calls(list(calls))
            answered -= len(calls)
        return _ANSWER

    def report(self) -> None:
        print(f"STATS calls={self.calls}", flush=True)


async def _serve_fake_llm() -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    async with _ScriptedLLM() as server:
        loop.add_signal_handler(signal.SIGUSR1, server.report)
        print(f"READY {server.base_url}", flush=True)
        await stopping.wait()


def _model_list(directory: Path, base_url: str) -> Path:
    deployments = [
        {
            "model_name": model,
            "litellm_params": {"model": f"openai/{model}", "api_base": base_url, "api_key": "x"},
            "model_info": {
                "input_cost_per_token": 0.000001,
                "output_cost_per_token": 0.000002,
                "supports_function_calling": True,
            },
        }
        for model in _SCRIPTS
    ]
    path = directory / "models.yaml"
    path.write_text(yaml.safe_dump({"model_list": deployments}), encoding="utf-8")
    return path


async def _define_agents(session: aiohttp.ClientSession, base_url: str) -> None:
    token = mint_token(JWT_SECRET, tenant_id=TENANT, subject="bench", roles=["tenant_admin"])
    headers = {"Authorization": f"Bearer {token}"}
    for name, definition in _AGENTS.items():
        body = {"name": name, **definition}
        async with session.post(f"{base_url}/api/v1/agents", json=body, headers=headers) as r:
            if r.status != 201:
                raise RuntimeError(f"defining agent {name}: HTTP {r.status}: {await r.text()}")


async def _one_task(session: aiohttp.ClientSession, stack: Stack, agent: str) -> float:
    """Submits a task of `agent` and reads its stream to `done`; returns the milliseconds
    from the POST to `done`."""
    headers = stack.headers(Accept="text/event-stream")
    body = {"input": "Say ok.", "agent": agent}
    started = time.perf_counter()
    async with session.post(f"{stack.base_url}/api/v1/tasks", json=body, headers=headers) as r:
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {await r.text()}")
        async for event in sse_events(r):
            if event.type == "done":
                elapsed = (time.perf_counter() - started) * 1000
                if '"completed"' not in event.data:
                    raise RuntimeError(f"task of {agent} ended: {event.data}")
                return elapsed
    raise RuntimeError(f"the stream of a task of {agent} ended without `done`")


async def _block(
    session: aiohttp.ClientSession,
    stack: Stack,
    llm: Proc,
    series: Series,
    tasks: int,
    concurrency: int,
) -> None:
    """`tasks` tasks of the series' workload by `concurrency` clients, measured."""
    remaining = tasks
    latencies: list[float] = []

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            try:
                latencies.append(await _one_task(session, stack, series.workload.agent))
            except Exception as exc:
                series.failures.append(f"{type(exc).__name__}: {exc}")

    database = stack.database_url.rsplit("/", 1)[1]
    calls = (await llm_stats(llm))["calls"]
    cpu, pg = stack.service.cpu_s(), postgres_cpu_s(database)
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    series.server_cpu_s += stack.service.cpu_s() - cpu
    series.postgres_cpu_s += postgres_cpu_s(database) - pg
    series.llm_calls += (await llm_stats(llm))["calls"] - calls
    series.latencies_ms += latencies


async def _children(database_url: str) -> int:
    database = database_url.rsplit("/", 1)[1]
    connection = await asyncpg.connect(host=PG_HOST, user=PG_USER, database=database)
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM tasks WHERE parent_task_id IS NOT NULL"
        )
        return count
    finally:
        await connection.close()


async def _measure(
    tasks: int, rounds: int, concurrencies: tuple[int, ...]
) -> list[SubAgentOverhead]:
    results = []
    with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
        directory = Path(tmp)
        async with postgres_database() as database_url, AsyncExitStack() as processes:
            args = [sys.executable, "-m", "bench.sub_agent_overhead"]
            llm = await processes.enter_async_context(child(args, directory / "llm.log", {}))
            models = str(_model_list(directory, llm.ready))
            env = service_env(directory, database_url, {}, OMNIFORGE_MODELS_FILE=models)
            service = await processes.enter_async_context(start_service(directory, env))
            stack = Stack(service, {}, database_url)
            async with client() as session:
                await _define_agents(session, stack.base_url)
                # At the highest concurrency, so that the service's database pool has opened
                # what it will use: a backend's CPU is read only while it lives.
                for workload in WORKLOADS:
                    warm_up = Series(workload)
                    await _block(session, stack, llm, warm_up, WARM_UP, max(concurrencies))
                    if warm_up.failures:
                        raise RuntimeError(f"{workload.name}: {warm_up.failures[0]}")
                for concurrency in concurrencies:
                    children_before = await _children(database_url)
                    problems_before = len(service.problems())
                    series = {w.name: Series(w) for w in WORKLOADS}
                    per_block = max(tasks // rounds, 1)
                    wall, machine = time.perf_counter(), machine_cpu_s()
                    service_cpu, bench_cpu = service.cpu_s(), llm.cpu_s() + time.process_time()
                    for round_ in range(rounds):
                        shift = round_ % len(WORKLOADS)
                        for workload in (*WORKLOADS[shift:], *WORKLOADS[:shift]):
                            await _block(
                                session, stack, llm, series[workload.name], per_block, concurrency
                            )
                    results.append(
                        SubAgentOverhead(
                            concurrency=concurrency,
                            rounds=rounds,
                            series=series,
                            children=await _children(database_url) - children_before,
                            server_problems=service.problems()[problems_before:],
                            wall_s=time.perf_counter() - wall,
                            machine_cpu_s=machine_cpu_s() - machine,
                            service_cpu_s=service.cpu_s() - service_cpu,
                            bench_cpu_s=llm.cpu_s() + time.process_time() - bench_cpu,
                        )
                    )
    return results


def run(
    tasks: int = 400, rounds: int = 10, concurrencies: tuple[int, ...] = (1, 8)
) -> list[SubAgentOverhead]:
    """`tasks` measured tasks per workload, in `rounds` blocks each, once per concurrency."""
    return run_async(_measure(tasks, rounds, concurrencies))


if __name__ == "__main__":
    asyncio.run(_serve_fake_llm())
