"""What the service benchmarks share: a throw-away Postgres database built by the migrations, the
fake LLM server and the service each in a process of its own, an aiohttp client, SSE parsing,
and readings of a process's CPU time and resident memory from /proc."""

import asyncio
import json
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import aiohttp
import asyncpg
import uvloop
import yaml

from app.chain.models import utc_now
from app.security import mint_token
from app.storage import Database, upgrade_to_head
from app.storage.tenants import TenantRepository

ROOT = Path(__file__).resolve().parent.parent
FAKE_LLM = ROOT / "tests" / "fakes" / "openai_server.py"
PG_HOST = "127.0.0.1"
PG_USER = "postgres"
MODEL = "bench-model"
TENANT = "bench"
JWT_SECRET = "bench-secret-" + "x" * 40
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_START_TIMEOUT_S = 60

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs the client side on uvloop, as cheap a load generator as Python offers."""
    raise_open_files_limit()  # inherited by the processes started from here
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def raise_open_files_limit() -> int:
    """Raises the soft limit on open files to the hard limit; returns it."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


class Proc:
    """A child process that prints one `READY <x>` line once it serves."""

    def __init__(self, process: asyncio.subprocess.Process, ready: str, log: Path) -> None:
        self.process = process
        self.ready = ready
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {self.pid}")

    def open_files(self) -> int:
        """File descriptors open now (sockets included)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def cpu_s(self) -> float:
        """User + system CPU seconds so far."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def problems(self) -> list[str]:
        """What the process wrote on stderr (warnings, errors, tracebacks)."""
        return [line for line in self.log.read_text().splitlines() if line.strip()]

    async def kill(self) -> None:
        """SIGKILL: gone at once, nothing handed over."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), timeout=30)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


def postgres_cpu_s(database: str) -> float:
    """User + system CPU seconds of the Postgres backends connected to `database` (compare
    readings over a span in which the service keeps its pool open)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        if not title.startswith(b"postgres: ") or f" {database} ".encode() not in title:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / _CLOCK_TICKS


def machine_cpu_s() -> float:
    """CPU seconds all CPUs of this machine have been busy (any process's, not only ours)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


@asynccontextmanager
async def child(args: Sequence[str], log: Path, env: dict[str, str]) -> AsyncIterator[Proc]:
    with log.open("w") as stderr:
        process = await asyncio.create_subprocess_exec(
            *args,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
    proc = Proc(process, "", log)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=_START_TIMEOUT_S)
        if not line.startswith(b"READY "):
            problems = "\n".join(proc.problems()[-20:])
            raise RuntimeError(f"{args[1]} did not start: {line!r}\n{problems}")
        proc.ready = line.decode().removeprefix("READY ").strip()
        yield proc
    finally:
        await proc.stop()


async def llm_stats(llm: Proc) -> dict[str, int]:
    """The fake LLM server's calls answered so far, in flight now, and the peak in flight since
    the last reading."""
    assert llm.process.stdout is not None
    llm.process.send_signal(signal.SIGUSR1)
    line = (await llm.process.stdout.readline()).decode().split()
    return {key: int(value) for key, value in (item.split("=") for item in line[1:])}


async def prepare_database(url: str) -> None:
    """Builds the database at `url` with the migrations and adds the benchmarks' tenant."""
    database = Database(url)
    try:
        await upgrade_to_head(database)
        async with database.transaction() as connection:
            await TenantRepository(connection).create(TENANT, "Benchmarks", at=utc_now())
    finally:
        await database.dispose()


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A new database on the local Postgres, migrated to head; dropped afterwards."""
    name = f"omniforge_bench_{uuid4().hex[:12]}"
    admin = await asyncpg.connect(host=PG_HOST, user=PG_USER, database="postgres")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}/{name}"
        await prepare_database(url)
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@dataclass(frozen=True)
class Stack:
    """The service on Postgres; model `model_for(d)` is answered by a fake LLM server of its own
    after `d` seconds (the offline `demo` model is there too)."""

    service: Proc
    llms: dict[float, Proc]
    database_url: str

    @property
    def base_url(self) -> str:
        return self.service.ready

    @staticmethod
    def model_for(delay_s: float) -> str:
        return f"bench-{delay_s:g}s"

    def headers(self, **extra: str) -> dict[str, str]:
        token = mint_token(JWT_SECRET, tenant_id=TENANT, subject="bench", roles=["member"])
        return {"Authorization": f"Bearer {token}", **extra}

    def problems(self) -> list[str]:
        """Lines the service and the fake LLM servers wrote on stderr."""
        return [line for proc in (self.service, *self.llms.values()) for line in proc.problems()]


@asynccontextmanager
async def stack(
    llm_delays_s: Sequence[float] = (), *, llm_args: Sequence[str] = (), **settings: str
) -> AsyncIterator[Stack]:
    """A fresh database, one fake LLM server per delay (`llm_args`: more of its options), and
    the service (`settings` are extra `OMNIFORGE_*` variables)."""
    with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
        directory = Path(tmp)
        async with postgres_database() as database_url, AsyncExitStack() as processes:
            llms = await fake_llms(processes, directory, llm_delays_s, llm_args)
            env = service_env(directory, database_url, llms, **settings)
            service = await processes.enter_async_context(start_service(directory, env))
            yield Stack(service, llms, database_url)


async def fake_llms(
    processes: AsyncExitStack,
    directory: Path,
    delays_s: Sequence[float],
    llm_args: Sequence[str] = (),
) -> dict[float, Proc]:
    """One fake LLM server per delay, each stopped with `processes`."""
    llms: dict[float, Proc] = {}
    for delay in dict.fromkeys(delays_s):
        args = [sys.executable, str(FAKE_LLM), "--port", "0", "--model", MODEL]
        args += ["--delay-s", str(delay), *llm_args]
        log = directory / f"llm-{delay:g}s.log"
        llms[delay] = await processes.enter_async_context(child(args, log, {}))
    return llms


def service_env(
    directory: Path, database_url: str, llms: dict[float, Proc], **settings: str
) -> dict[str, str]:
    """The service's environment: the database, the fake LLM servers' models, `settings`."""
    env = {
        "OMNIFORGE_ENV": "development",
        "OMNIFORGE_DATA_DIR": str(directory),
        "OMNIFORGE_DATABASE_URL": database_url,
        "OMNIFORGE_JWT_SECRET": JWT_SECRET,
        "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",  # a failed call shows as a failed task
        "OMNIFORGE_SHUTDOWN_GRACE_S": "2",
        **settings,
    }
    if llms:
        env["OMNIFORGE_MODELS_FILE"] = str(_model_list(directory, llms))
    return env


def start_service(
    directory: Path, env: dict[str, str], name: str = "service"
) -> AbstractAsyncContextManager[Proc]:
    """An instance of the service in a process of its own (stopped by SIGTERM on exit);
    instances started with the same `env` share its database."""
    args = [sys.executable, "-m", "bench.service_server"]
    return child(args, directory / f"{name}.log", env)


def _model_list(directory: Path, llms: dict[float, Proc]) -> Path:
    deployments = [
        {
            "model_name": Stack.model_for(delay),
            "litellm_params": {"model": f"openai/{MODEL}", "api_base": llm.ready, "api_key": "x"},
            "model_info": {
                "input_cost_per_token": 0.000001,
                "output_cost_per_token": 0.000002,
                "supports_function_calling": True,
            },
        }
        for delay, llm in llms.items()
    ]
    path = directory / "models.yaml"
    path.write_text(yaml.safe_dump({"model_list": deployments}), encoding="utf-8")
    return path


def client(limit: int = 0) -> aiohttp.ClientSession:
    """Keep-alive connections, `limit` at most (0: no limit); no total timeout (streams)."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit), timeout=timeout, raise_for_status=False
    )


@dataclass(frozen=True, slots=True)
class SseEvent:
    received: float  # time.time() when the blank line ending the event was read
    id: int
    type: str
    data: str


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[SseEvent]:
    """The events of an SSE response as they arrive; comments (keep-alives) are skipped."""
    fields: dict[str, str] = {}
    async for raw in response.content:
        line = raw.rstrip(b"\r\n")
        if not line:
            if "data" in fields:
                event_id = int(fields.get("id", "0"))
                yield SseEvent(
                    time.time(), event_id, fields.get("event", "message"), fields["data"]
                )
            fields = {}
        elif not line.startswith(b":"):
            name, _, value = line.decode().partition(":")
            fields[name] = value.removeprefix(" ")


async def follow(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> str:
    """Reads a task's stream (GET) to its `done`; returns the final state."""
    async with session.get(url, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"GET {url}: HTTP {response.status}: {await response.text()}")
        async for event in sse_events(response):
            if event.type == "done":
                return str(json.loads(event.data)["final_state"])
    raise RuntimeError(f"the stream of {url} ended without `done`")
