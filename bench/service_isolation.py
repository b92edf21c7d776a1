"""Bulkheads, on Postgres: how much tenant A's expensive and invalid traffic costs tenant B.

Tenant B (a member) runs simple tasks one after another ("What is 6*7?", one LLM call to a fake
LLM server answering at once), first alone (the baseline), then while tenant A (an admin)
- uploads six PDF bombs at once (4.5 KB each, about 4 s of CPU per page unbounded),
- defines an agent whose `response_format` has a backtracking pattern (`^(a|a)+$`) and runs
  tasks whose answers (`{"code": "aaa…a!"}`, 27 letters) are checked against it, and
- floods 2,000 invalid requests (POST /api/v1/tasks with an empty input, 16 at a time).
A prober GETs `/healthz` every 20 ms throughout. Reported: B's task latency p50 in both phases
and their ratio, `/healthz` p99 during the attack, how each bomb and pattern task ended, and
the flood's answers. The service runs with its default limits (`OMNIFORGE_DOCUMENT_*`,
`OMNIFORGE_TENANT_WORK_SLOTS`, `OMNIFORGE_CLIENT_ERRORS_PER_MINUTE`).
"""

import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from app.chain.models import utc_now
from app.security import mint_token
from app.storage import Database
from app.storage.tenants import TenantRepository
from bench.service_harness import (
    FAKE_LLM,
    JWT_SECRET,
    MODEL,
    Stack,
    child,
    client,
    fake_llms,
    follow,
    percentile,
    postgres_database,
    run_async,
    service_env,
    start_service,
)
from tests.tools.documents.bombs import make_pdf_bomb

ATTACKER = "attacker"
BOMBS = 6
FLOOD = 2_000
FLOOD_CONCURRENCY = 16
PATTERN_TASKS = 4
PROBE_EVERY_S = 0.02
BOMB_WAIT_S = 900
MINUTE_S = 61.0  # how long a tenant's 4xx refusal lasts at most
# The fake LLM servers: B's answers at once; A's answers with what the pattern chokes on.
PLAIN_DELAY_S, EVIL_DELAY_S = 0.0, 0.001
EVIL_ANSWER = json.dumps({"code": "a" * 27 + "!"})
BACKTRACKING = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(a|a)+$"}},
    "required": ["code"],
}


@dataclass
class Isolation:
    baseline_ms: list[float] = field(default_factory=list)
    attack_ms: list[float] = field(default_factory=list)
    baseline_health_ms: list[float] = field(default_factory=list)
    attack_health_ms: list[float] = field(default_factory=list)
    b_failures: list[str] = field(default_factory=list)
    bombs: list[tuple[int, str, float]] = field(default_factory=list)
    pattern_tasks: list[tuple[str, str]] = field(default_factory=list)
    flood: Counter[int] = field(default_factory=Counter)
    flood_s: float = 0.0
    attack_s: float = 0.0
    server_problems: list[str] = field(default_factory=list)

    @property
    def baseline_p50_ms(self) -> float:
        return percentile(self.baseline_ms, 50)

    @property
    def attack_p50_ms(self) -> float:
        return percentile(self.attack_ms, 50)

    @property
    def ratio(self) -> float:
        return self.attack_p50_ms / self.baseline_p50_ms

    @property
    def health_p99_ms(self) -> float:
        return percentile(self.attack_health_ms, 99)


def attacker_headers(tenant: str = ATTACKER) -> dict[str, str]:
    """An admin's token of the attacking tenant."""
    token = mint_token(JWT_SECRET, tenant_id=tenant, subject="mallory", roles=["tenant_admin"])
    return {"Authorization": f"Bearer {token}"}


async def _b_task(session: aiohttp.ClientSession, stack: Stack) -> tuple[str, float]:
    headers = stack.headers()
    body = {"input": "What is 6*7?", "model": stack.model_for(PLAIN_DELAY_S)}
    started = time.perf_counter()
    async with session.post(f"{stack.base_url}/api/v1/tasks", json=body, headers=headers) as r:
        if r.status != 202:
            return f"HTTP {r.status}", time.perf_counter() - started
        accepted = await r.json()
    state = await follow(session, stack.base_url + accepted["stream_url"], headers)
    return state, time.perf_counter() - started


async def b_tasks(
    session: aiohttp.ClientSession,
    stack: Stack,
    into: list[float],
    failures: list[str],
    *,
    count: int | None = None,
    until: asyncio.Event | None = None,
) -> None:
    done = 0
    while (count is not None and done < count) or (until is not None and not until.is_set()):
        state, seconds = await _b_task(session, stack)
        done += 1
        if state == "completed":
            into.append(seconds * 1000)
        else:
            failures.append(state)


async def _probe(
    session: aiohttp.ClientSession, base_url: str, into: list[float], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        async with session.get(f"{base_url}/healthz") as response:
            await response.read()
        into.append((time.perf_counter() - started) * 1000)
        # Paced, not a load of its own: one probe per interval.
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PROBE_EVERY_S)


async def _bomb(session: aiohttp.ClientSession, base_url: str, result: Isolation) -> None:
    form = aiohttp.FormData()
    form.add_field("file", make_pdf_bomb(), filename="bomb.pdf", content_type="application/pdf")
    started = time.perf_counter()
    # One tenant's documents are read one at a time: the sixth waits for five others.
    async with session.post(
        f"{base_url}/api/v1/files",
        data=form,
        headers=attacker_headers(),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=BOMB_WAIT_S),
    ) as response:
        body = await response.json()
    kind = str(body.get("type", "")).rsplit("/", 1)[-1]
    errors = body.get("errors") or [{}]
    result.bombs.append(
        (response.status, f"{kind}: {errors[0].get('message')}", time.perf_counter() - started)
    )


async def _define_picky(session: aiohttp.ClientSession, stack: Stack) -> None:
    definition = {
        "name": "picky",
        "model": stack.model_for(EVIL_DELAY_S),
        "response_format": BACKTRACKING,
    }
    async with session.post(
        f"{stack.base_url}/api/v1/agents", json=definition, headers=attacker_headers()
    ) as response:
        if response.status != 201:
            raise RuntimeError(f"defining the agent: {response.status} {await response.text()}")


async def _submit_pattern_tasks(session: aiohttp.ClientSession, stack: Stack) -> list[str]:
    """A's tasks whose answers are checked against the backtracking pattern (their checks run
    while the flood and the bombs go on); their ids."""
    ids: list[str] = []
    for _ in range(PATTERN_TASKS):
        body = {"input": "Give me the code", "agent": "picky"}
        async with session.post(
            f"{stack.base_url}/api/v1/tasks", json=body, headers=attacker_headers()
        ) as response:
            if response.status != 202:
                raise RuntimeError(f"submitting: {response.status} {await response.text()}")
            ids.append((await response.json())["task_id"])
    return ids


async def _pattern_outcomes(
    session: aiohttp.ClientSession, stack: Stack, ids: list[str], result: Isolation
) -> None:
    """Read once the flood's refusal has lapsed (a minute after it)."""
    for task_id in ids:
        async with session.get(
            f"{stack.base_url}/api/v1/tasks/{task_id}", headers=attacker_headers()
        ) as response:
            task = await response.json()
        if response.status != 200:
            result.pattern_tasks.append((f"HTTP {response.status}", ""))
            continue
        reason = str(task.get("error_message") or "")
        reason = "pattern check over its budget" if "took longer than" in reason else reason[:60]
        state = f"{task['status']} {task.get('error_code') or ''}".strip()
        result.pattern_tasks.append((state, reason))


async def _flood(session: aiohttp.ClientSession, base_url: str, result: Isolation) -> None:
    headers = attacker_headers()
    left = FLOOD
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            async with session.post(
                f"{base_url}/api/v1/tasks", json={"input": ""}, headers=headers
            ) as response:
                await response.read()
                result.flood[response.status] += 1

    await asyncio.gather(*(worker() for _ in range(FLOOD_CONCURRENCY)))
    result.flood_s = time.perf_counter() - started


async def attacker_tenant(database_url: str, tenant: str = ATTACKER) -> None:
    """Stores the attacking tenant, every tool enabled."""
    database = Database(database_url)
    try:
        async with database.transaction() as connection:
            await TenantRepository(connection).create(tenant, "Attacker", at=utc_now())
    finally:
        await database.dispose()


async def measure(stack: Stack, baseline_tasks: int) -> Isolation:
    result = Isolation()
    async with client() as session:
        await b_tasks(session, stack, [], [], count=5)  # warm-up
        stop = asyncio.Event()
        prober = asyncio.create_task(
            _probe(session, stack.base_url, result.baseline_health_ms, stop)
        )
        await b_tasks(session, stack, result.baseline_ms, result.b_failures, count=baseline_tasks)
        stop.set()
        await prober
        problems_before = len(stack.service.problems())

        stop, attack_over = asyncio.Event(), asyncio.Event()
        prober = asyncio.create_task(_probe(session, stack.base_url, result.attack_health_ms, stop))
        victim = asyncio.create_task(
            b_tasks(session, stack, result.attack_ms, result.b_failures, until=attack_over)
        )
        started = time.perf_counter()
        await _define_picky(session, stack)
        bombs = [asyncio.create_task(_bomb(session, stack.base_url, result)) for _ in range(BOMBS)]
        pattern_ids = await _submit_pattern_tasks(session, stack)
        await asyncio.gather(*bombs, _flood(session, stack.base_url, result))
        result.attack_s = time.perf_counter() - started
        attack_over.set()
        await victim
        stop.set()
        await prober
        await asyncio.sleep(max(0.0, started + result.flood_s + MINUTE_S - time.perf_counter()))
        await _pattern_outcomes(session, stack, pattern_ids, result)
        result.server_problems = stack.service.problems()[problems_before:]
    return result


def run(baseline_tasks: int = 60) -> Isolation:
    async def main() -> Isolation:
        with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
            directory = Path(tmp)
            async with postgres_database() as database_url, AsyncExitStack() as processes:
                await attacker_tenant(database_url)
                llms = await fake_llms(processes, directory, [PLAIN_DELAY_S])
                args = [sys.executable, str(FAKE_LLM), "--port", "0", "--model", MODEL]
                args += ["--delay-s", str(EVIL_DELAY_S), "--reply", EVIL_ANSWER]
                llms[EVIL_DELAY_S] = await processes.enter_async_context(
                    child(args, directory / "llm-evil.log", {})
                )
                env = service_env(directory, database_url, llms)
                service = await processes.enter_async_context(start_service(directory, env))
                return await measure(Stack(service, llms, database_url), baseline_tasks)

    return run_async(main())


def report(result: Isolation, *, p50_ratio_target: float, health_p99_target_ms: float) -> None:
    def verdict(ok: bool) -> str:
        return "meets" if ok else "MISSES"

    print(
        f"  tenant B simple task p50: baseline {result.baseline_p50_ms:.1f} ms "
        f"({len(result.baseline_ms)} tasks), under attack {result.attack_p50_ms:.1f} ms "
        f"({len(result.attack_ms)} tasks, p90 {percentile(result.attack_ms, 90):.1f} ms): "
        f"{result.ratio:.2f}x ({verdict(result.ratio <= p50_ratio_target)} "
        f"<= {p50_ratio_target:g}x); B failures: {len(result.b_failures)}"
    )
    print(
        f"  /healthz p99 under attack: {result.health_p99_ms:.1f} ms "
        f"({len(result.attack_health_ms)} probes, max {max(result.attack_health_ms):.1f} ms; "
        f"baseline p99 {percentile(result.baseline_health_ms, 99):.1f} ms) "
        f"({verdict(result.health_p99_ms <= health_p99_target_ms)} <= {health_p99_target_ms:g} ms)"
    )
    bombs = Counter(f"{status} {kind}" for status, kind, _ in result.bombs)
    slowest = max((seconds for *_, seconds in result.bombs), default=float("nan"))
    print(
        f"  PDF bombs: {dict(bombs)}; the last answered after {slowest:.1f} s (one tenant's "
        "documents are read one at a time, each within its own limits)"
    )
    outcomes = Counter(f"{state} ({reason})" for state, reason in result.pattern_tasks)
    print(f"  backtracking-pattern tasks: {dict(outcomes)}")
    print(
        f"  invalid-request flood: {dict(sorted(result.flood.items()))} in "
        f"{result.flood_s:.1f} s; attack {result.attack_s:.1f} s in all"
    )
    if result.server_problems:
        print(f"  server stderr lines during the attack: {len(result.server_problems)}")
