"""OmniForge beside its peer, on the same task, in one run: `scripts/bench peer`.

The task is the two-call ReAct turn "What is 12*(3+4)?": an LLM call that asks for the
calculator, the calculator, and an LLM call that answers. Every system talks to the same fake
OpenAI-compatible model server (it answers a request without a tool result with a calculator
call, and one with it with "ok", at once). The systems:

- OmniForge on SQLite (its embedded default) and on Postgres, each with its default agent (every
  tool it offers) and with exactly the peer's two tools (`tools: [calculator, current_time]`);
- LangGraph's agent server (`langgraph dev`, in-memory, its default 10 jobs, no reloader), a
  prebuilt ReAct graph with the same two tools and `ChatOpenAI`, installed from
  `bench/peers/langgraph.lock` into `.bench/peers/langgraph`.

Each round starts every system afresh, in an order that rotates from round to round, pinned to
CPU 0 (`taskset`; this client and the model server stay off it), warms it with one task per
client, then runs `tasks` tasks from `clients` clients, each submitting and following its task to
the end (OmniForge: POST, then its SSE stream to `done`; LangGraph: a stateless `POST
/runs/stream` read to its end). Before the load one client runs `SINGLE_CLIENT_TASKS` tasks in
turn, submit -> answer alone, the same way; on OmniForge as many again each in one request (a
POST with `Accept: text/event-stream` is answered by the task's stream, as LangGraph's
`/runs/stream` is). Server CPU is the process tree's (/proc); on Postgres the
database's backends are reported beside it (live ones, and those that exited meanwhile through
the postmaster's children's time). Ratios are to LangGraph in the same round.
"""

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench import langgraph_peer, peer_start
from bench.server_start import Start, _cpu_s, _rss_mb, _tree, free_port
from bench.service_harness import (
    FAKE_LLM,
    MODEL,
    Proc,
    Stack,
    child,
    client,
    llm_stats,
    percentile,
    postgres_database,
    prepare_database,
    run_async,
    service_env,
    sse_events,
)

QUESTION = "What is 12*(3+4)?"
PEER_TOOLS = ["calculator", "current_time"]
SERVER_CPU = 0
READY_TIMEOUT_S = 90.0
TASK_TIMEOUT_S = 60.0
# Tasks one client runs one after another, after the warm-up: submit -> answer alone.
SINGLE_CLIENT_TASKS = 100

PEER_GRAPH = '''"""A ReAct agent with two tools on an OpenAI-compatible model: the peer's side of
`scripts/bench peer`."""

import ast
import operator
import os
from datetime import UTC, datetime

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.operand))
    raise ValueError("not arithmetic")


@tool
def calculator(expression: str) -> str:
    """Evaluates an arithmetic expression (+, -, *, / and parentheses)."""
    return str(_value(ast.parse(expression, mode="eval").body))


@tool
def current_time() -> str:
    """The current date and time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat()


model = ChatOpenAI(
    model=os.environ["PEER_MODEL"],
    base_url=os.environ["PEER_BASE_URL"],
    api_key="not-needed",
    max_retries=0,
)
graph = create_react_agent(model, [calculator, current_time])
'''
PEER_CONFIG = {"dependencies": ["."], "graphs": {"agent": "./graph.py:graph"}}


@dataclass(frozen=True)
class Outcome:
    """One system's measured tasks in one round."""

    system: str
    tasks: int
    failures: list[str]
    wall_s: float
    cpu_s: float
    llm_calls: int
    latencies_s: list[float]
    rss_idle_mb: float
    rss_after_mb: float
    postgres_cpu_s: float | None = None
    single_client_s: list[float] = field(default_factory=list)
    # The same, each task one request whose answer is its stream (where the server has one).
    single_request_s: list[float] = field(default_factory=list)

    @property
    def cpu_ms_per_task(self) -> float:
        return self.cpu_s * 1000 / self.tasks

    @property
    def calls_per_cpu_s(self) -> float:
        return self.llm_calls / self.cpu_s if self.cpu_s else float("nan")

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.wall_s

    def latency_ms(self, q: float) -> float:
        return percentile(self.latencies_s, q) * 1000

    def single_client_ms(self, q: float) -> float:
        return percentile(self.single_client_s, q) * 1000

    def single_request_ms(self, q: float) -> float:
        return percentile(self.single_request_s, q) * 1000


@dataclass(frozen=True)
class Server:
    """A server under test: its process tree's root, where it answers, and how a task is run
    against it (returns "completed" or what went wrong)."""

    pid: int
    base_url: str
    run_task: Callable[[aiohttp.ClientSession], Awaitable[str]]
    database: str | None = None  # Postgres database name, for its backends' CPU
    # A task in one request, submitted with `Accept: text/event-stream` (OmniForge only).
    run_in_one: Callable[[aiohttp.ClientSession], Awaitable[str]] | None = None


System = Callable[[Path, str], contextlib.AbstractAsyncContextManager[Server]]


def _pinned(args: list[str]) -> list[str]:
    return ["taskset", "-c", str(SERVER_CPU), *args]


def _omniforge(database: str, tools: list[str] | None) -> System:
    @contextlib.asynccontextmanager
    async def system(directory: Path, llm_url: str) -> AsyncIterator[Server]:
        async with _database(database, directory) as (url, name):
            # Its model list's model the default, as a deployment with one would have it.
            env = service_env(
                directory,
                url,
                {},
                OMNIFORGE_MODELS_FILE=_models(directory, llm_url),
                OMNIFORGE_DEFAULT_MODEL=Stack.model_for(0.0),
            )
            args = _pinned([sys.executable, "-m", "bench.service_server"])
            async with child(args, directory / f"omniforge-{database}.log", env) as proc:
                headers = Stack(proc, {}, url).headers()
                body: dict[str, object] = {"input": QUESTION, "model": Stack.model_for(0.0)}
                if tools is not None:
                    body["tools"] = tools

                async def run_task(session: aiohttp.ClientSession) -> str:
                    async with session.post(
                        proc.ready + "/api/v1/tasks", json=body, headers=headers
                    ) as response:
                        if response.status != 202:
                            return f"HTTP {response.status}: {(await response.text())[:200]}"
                        accepted = await response.json()
                    async with session.get(
                        proc.ready + accepted["stream_url"], headers=headers
                    ) as stream:
                        return await _final_state(stream)

                async def run_in_one(session: aiohttp.ClientSession) -> str:
                    streamed = {**headers, "Accept": "text/event-stream"}
                    async with session.post(
                        proc.ready + "/api/v1/tasks", json=body, headers=streamed
                    ) as stream:
                        if stream.status != 200:
                            return f"HTTP {stream.status}: {(await stream.text())[:200]}"
                        return await _final_state(stream)

                yield Server(proc.pid, proc.ready, run_task, name, run_in_one)

    return system


async def _final_state(stream: aiohttp.ClientResponse) -> str:
    """A task's stream read to its `done`: the task's final state."""
    async for event in sse_events(stream):
        if event.type == "done":
            return str(json.loads(event.data)["final_state"])
    return "the stream ended without done"


@contextlib.asynccontextmanager
async def _database(kind: str, directory: Path) -> AsyncIterator[tuple[str, str | None]]:
    if kind == "postgres":
        async with postgres_database() as url:
            yield url, url.rsplit("/", 1)[1]
        return
    url = f"sqlite+aiosqlite:///{directory / 'omniforge.db'}"
    await prepare_database(url)
    yield url, None


def _models(directory: Path, llm_url: str) -> str:
    import yaml

    deployment = {
        "model_name": Stack.model_for(0.0),
        "litellm_params": {"model": f"openai/{MODEL}", "api_base": llm_url, "api_key": "x"},
        "model_info": {
            "input_cost_per_token": 0.000001,
            "output_cost_per_token": 0.000002,
            "supports_function_calling": True,
        },
    }
    path = directory / "models.yaml"
    path.write_text(yaml.safe_dump({"model_list": [deployment]}), encoding="utf-8")
    return str(path)


def _peer_project(directory: Path) -> Path:
    project = directory / "peer"
    project.mkdir()
    (project / "graph.py").write_text(PEER_GRAPH, encoding="utf-8")
    (project / "langgraph.json").write_text(json.dumps(PEER_CONFIG), encoding="utf-8")
    return project


def _peer_env(llm_url: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "OPENAI_"))
    }
    env.update(langgraph_peer.PEER_ENV, PEER_MODEL=MODEL, PEER_BASE_URL=llm_url)
    return env


@contextlib.asynccontextmanager
async def _langgraph(directory: Path, llm_url: str) -> AsyncIterator[Server]:
    langgraph = langgraph_peer.install()
    project = _peer_project(directory)
    env = _peer_env(llm_url)
    port = free_port()
    command = [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    with (directory / "langgraph.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *_pinned(command),
            cwd=project,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    body = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": QUESTION}]},
        "stream_mode": ["values"],
    }

    async def run_task(session: aiohttp.ClientSession) -> str:
        async with session.post(base_url + "/runs/stream", json=body) as response:
            if response.status != 200:
                return f"HTTP {response.status}: {(await response.text())[:200]}"
            last = ""
            async for event in sse_events(response):
                if event.type == "error":
                    return f"error: {event.data[:200]}"
                if event.type == "values":
                    last = event.data
        messages = json.loads(last).get("messages", []) if last else []
        answered = bool(messages) and messages[-1].get("content") == "ok"
        return "completed" if answered and len(messages) == 4 else f"unexpected: {last[:300]}"

    try:
        await _wait_ready(process, base_url + "/ok", directory / "langgraph.log")
        yield Server(process.pid, base_url, run_task)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        try:
            await asyncio.wait_for(process.wait(), timeout=30)
        except TimeoutError:
            os.killpg(process.pid, 9)
            await process.wait()


async def _wait_ready(process: asyncio.subprocess.Process, url: str, log: Path) -> None:
    """Asks `url` until it answers 200: the peer says nothing on a pipe when it is ready."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with client() as session:
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"the peer exited; its log: {log}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the peer was not ready after {READY_TIMEOUT_S:g} s: {log}")
            await asyncio.sleep(0.05)  # a readiness probe: the peer offers no notification


def _postmaster_children_cpu_s() -> float:
    """CPU of the shared Postgres's exited children (backends), from its postmaster."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if title and title[0].endswith(b"postgres") and b"-D" in title:
            fields = stat[stat.rindex(")") + 2 :].split()
            return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _backends_cpu_s(database: str) -> float:
    from bench.service_harness import postgres_cpu_s

    return postgres_cpu_s(database) + _postmaster_children_cpu_s()


async def _measure(name: str, system: System, llm: Proc, tasks: int, clients: int) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="omniforge-peer-") as tmp:
        async with system(Path(tmp), llm.ready) as server:
            tree = _tree(server.pid)
            rss_idle = _rss_mb(tree)
            async with client() as session:
                warm = await asyncio.gather(*(server.run_task(session) for _ in range(clients)))
                failures = [outcome for outcome in warm if outcome != "completed"]
                if failures:
                    raise RuntimeError(f"{name}: the warm-up failed: {failures[:3]}")
                # One client alone: submit -> answer of each task in turn, before the load.
                alone: list[float] = []
                for _ in range(SINGLE_CLIENT_TASKS):
                    started = time.perf_counter()
                    outcome = await server.run_task(session)
                    alone.append(time.perf_counter() - started)
                    if outcome != "completed":
                        raise RuntimeError(f"{name}: a single-client task failed: {outcome}")
                in_one: list[float] = []
                for _ in range(SINGLE_CLIENT_TASKS if server.run_in_one is not None else 0):
                    assert server.run_in_one is not None
                    started = time.perf_counter()
                    outcome = await server.run_in_one(session)
                    in_one.append(time.perf_counter() - started)
                    if outcome != "completed":
                        raise RuntimeError(f"{name}: a single-request task failed: {outcome}")
                remaining = tasks
                latencies: list[float] = []

                async def worker() -> None:
                    nonlocal remaining
                    while remaining > 0:
                        remaining -= 1
                        started = time.perf_counter()
                        try:
                            async with asyncio.timeout(TASK_TIMEOUT_S):
                                outcome = await server.run_task(session)
                        except Exception as exc:
                            outcome = f"{type(exc).__name__}: {exc}"
                        latencies.append(time.perf_counter() - started)
                        if outcome != "completed":
                            failures.append(outcome)

                calls = (await llm_stats(llm))["calls"]
                tree = _tree(server.pid)
                cpu, wall = _cpu_s(tree), time.perf_counter()
                database_cpu = None if server.database is None else _backends_cpu_s(server.database)
                await asyncio.gather(*(worker() for _ in range(clients)))
                wall = time.perf_counter() - wall
                cpu = _cpu_s(_tree(server.pid)) - cpu
                if server.database is not None:
                    assert database_cpu is not None
                    database_cpu = _backends_cpu_s(server.database) - database_cpu
                calls = (await llm_stats(llm))["calls"] - calls
            rss_after = _rss_mb(_tree(server.pid))
    return Outcome(
        name,
        tasks,
        failures,
        wall,
        cpu,
        calls,
        latencies,
        rss_idle,
        rss_after,
        database_cpu,
        alone,
        in_one,
    )


SYSTEMS: dict[str, System] = {
    "OmniForge SQLite, 2 tools": _omniforge("sqlite", PEER_TOOLS),
    "OmniForge Postgres, 2 tools": _omniforge("postgres", PEER_TOOLS),
    "OmniForge SQLite, default agent": _omniforge("sqlite", None),
    "OmniForge Postgres, default agent": _omniforge("postgres", None),
    "LangGraph dev": _langgraph,
}
PEER = "LangGraph dev"


@dataclass(frozen=True)
class Round:
    """One round: each system's outcome under load, in the order they ran, and a start-up of
    each server (`bench.peer_start`)."""

    outcomes: list[Outcome]
    starts: dict[str, Start]


async def _starts(llm_url: str, round_number: int) -> dict[str, Start]:
    """A start of each server, the first of them alternating from round to round."""
    with tempfile.TemporaryDirectory(prefix="omniforge-peer-start-") as tmp:
        directory = Path(tmp)
        models, project = _models(directory, llm_url), _peer_project(directory)
        measures = {
            peer_start.OURS: lambda: peer_start.ours(
                directory, models, Stack.model_for(0.0), SERVER_CPU
            ),
            peer_start.THEIRS: lambda: peer_start.theirs(project, _peer_env(llm_url), SERVER_CPU),
        }
        names = list(measures)[:: -1 if round_number % 2 else 1]
        return {name: await asyncio.to_thread(measures[name]) for name in names}


def run(tasks: int = 1000, clients: int = 32, rounds: int = 2) -> list[Round]:
    """`rounds` rounds of every system."""

    async def main() -> list[Round]:
        others = set(range(os.cpu_count() or 1)) - {SERVER_CPU}
        if others:
            os.sched_setaffinity(0, others)  # the client and the model server off CPU 0
        with tempfile.TemporaryDirectory(prefix="omniforge-peer-llm-") as tmp:
            args = [sys.executable, str(FAKE_LLM), "--port", "0", "--model", MODEL]
            args += ["--tool-call", "calculator", "--tool-arguments", '{"expression": "12*(3+4)"}']
            async with child(args, Path(tmp) / "llm.log", {}) as llm:
                results: list[Round] = []
                names = list(SYSTEMS)
                for round_number in range(rounds):
                    shift = round_number % len(names)
                    order = names[shift:] + names[:shift]
                    starts = await _starts(llm.ready, round_number)
                    outcomes = []
                    for name in order:
                        outcomes.append(await _measure(name, SYSTEMS[name], llm, tasks, clients))
                    results.append(Round(outcomes, starts))
                return results

    return run_async(main())


def report(rounds: list[Round], clients: int) -> None:
    """Each round's figures per system, and its ratios to the peer in the same round."""
    tasks = rounds[0].outcomes[0].tasks
    print(
        f"\nOmniForge beside LangGraph's agent server: {tasks} two-call ReAct tasks per system "
        f"per round from {clients} clients, after one warm-up task per client\n"
        f"  conditions: each server on CPU {SERVER_CPU} alone (taskset), this client and the fake "
        f"model server on the other CPUs, Postgres 127.0.0.1 unpinned; systems started afresh "
        f"each round, in an order that rotates"
    )
    header = (
        f"  {'system':<34} {'CPU/task':>9} {'calls/CPU-s':>11} {'tasks/s':>8} {'p50':>8} "
        f"{'p99':>8} {'PG CPU/task':>11} {'RSS idle→after':>16} {'failed':>6}"
    )
    for number, round_ in enumerate(rounds, 1):
        outcomes = round_.outcomes
        print(f"\n  round {number} (in this order)\n{header}")
        for o in outcomes:
            database = (
                "" if o.postgres_cpu_s is None else f"{o.postgres_cpu_s * 1000 / o.tasks:.1f} ms"
            )
            print(
                f"  {o.system:<34} {o.cpu_ms_per_task:>6.1f} ms {o.calls_per_cpu_s:>11.0f} "
                f"{o.tasks_per_s:>8.1f} {o.latency_ms(50):>5.0f} ms {o.latency_ms(99):>5.0f} ms "
                f"{database:>11} {o.rss_idle_mb:>6.0f}→{o.rss_after_mb:<4.0f} MB "
                f"{len(o.failures):>6}"
            )
        peer = next(o for o in outcomes if o.system == PEER)
        print(f"  ratios to {PEER} in this round:")
        for o in outcomes:
            if o is peer:
                continue
            print(
                f"    {o.system:<32} CPU/task {o.cpu_ms_per_task / peer.cpu_ms_per_task:.2f}×, "
                f"calls/CPU-s {o.calls_per_cpu_s / peer.calls_per_cpu_s:.2f}×, "
                f"tasks/s {o.tasks_per_s / peer.tasks_per_s:.2f}×, "
                f"p99 {o.latency_ms(99) / peer.latency_ms(99):.2f}×"
            )
        print(
            f"  one client alone, {SINGLE_CLIENT_TASKS} tasks in turn, submit -> answer "
            "(OmniForge: POST then GET of its stream, as under load):"
        )
        for o in outcomes:
            in_one = (
                f";  one request (Accept: text/event-stream) p50 {o.single_request_ms(50):5.1f} ms"
                f"  p99 {o.single_request_ms(99):5.1f} ms"
                if o.single_request_s
                else ""
            )
            print(
                f"    {o.system:<34} p50 {o.single_client_ms(50):5.1f} ms"
                f"  p99 {o.single_client_ms(99):5.1f} ms{in_one}"
            )
        for o in outcomes:
            for failure in o.failures[:3]:
                print(f"  ! {o.system}: {failure}")
        _report_starts(round_.starts)


def _report_starts(starts: dict[str, Start]) -> None:
    ours, theirs = starts[peer_start.OURS], starts[peer_start.THEIRS]
    print("  start-up to ready (spawn -> first 200 of /readyz, /ok), in this order:")
    for name, start in starts.items():
        cpu, rss = f"CPU {start.cpu_s:.2f} s", f"RSS {start.rss_mb:.0f} MB"
        print(f"    {name:<16} {start.wall_s:.2f} s, {cpu}, {rss}")
    print(f"    ratio: {ours.wall_s / theirs.wall_s:.2f}× the peer's wall time")
