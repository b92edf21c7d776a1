"""Sandbox abuse, on Postgres: how much tenant A's sandbox bombs cost tenant B.

Tenant B (a member) runs simple tasks one after another ("What is 6*7?", one LLM call to a fake
LLM server answering at once), first alone (the baseline), then while tenant A's agents, each
with `run_shell`, run tasks whose one command is a bomb — a fork bomb, a memory bomb, a busy
loop and a workspace fill, `ATTACKERS_PER_BOMB` of each at a time, started again as each ends
(each holds its pressure until a limit stops it).
Reported: B's task latency p50 in both phases and their ratio, and how A's bomb calls ended
(the limit that stopped each). The service runs with sandboxes on and tighter per-call limits
than the defaults, so that every bomb ends within the measurement.
"""

import asyncio
import json
import sys
import tempfile
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.service_harness import (
    FAKE_LLM,
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
from bench.service_isolation import PLAIN_DELAY_S, attacker_headers, attacker_tenant, b_tasks

ATTACKER = "sandbox-attacker"
ATTACKERS_PER_BOMB = 1
# Each bomb's fake model, told apart by a delay of its own (the harness names models by it).
# Each holds its pressure until a limit ends it: the fork bomb and the busy loop spin, the
# memory bomb and the workspace fill hold what they took (to the wall-time limit).
BOMBS = {
    "fork bomb": (
        0.0011,
        "python3 -c 'import os\nwhile True:\n    try: os.fork()\n    except OSError: pass'",
    ),
    "memory bomb": (
        0.0012,
        "python3 -c 'import time\nx = []\ntry:\n    while True: x.append(bytearray(1 << 20))\n"
        "except MemoryError: time.sleep(60)'",
    ),
    "busy loop": (0.0013, "while true; do :; done"),
    "workspace fill": (
        0.0014,
        "for i in $(seq 100); do head -c 50000000 /dev/zero > f$i; done; sleep 60",
    ),
}
SETTINGS = {
    "OMNIFORGE_SANDBOXES": "on",
    "OMNIFORGE_SANDBOX_CPU_S": "10",
    "OMNIFORGE_SANDBOX_WALL_S": "10",
    "OMNIFORGE_SANDBOX_MEMORY_MB": "512",
    "OMNIFORGE_SANDBOX_WORKSPACE_MB": "256",
    "OMNIFORGE_SANDBOX_MAX_LIVE": "16",
}


@dataclass
class SandboxIsolation:
    baseline_ms: list[float] = field(default_factory=list)
    attack_ms: list[float] = field(default_factory=list)
    b_failures: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def ratio(self) -> float:
        return percentile(self.attack_ms, 50) / percentile(self.baseline_ms, 50)


async def _bomber(
    session: aiohttp.ClientSession,
    stack: Stack,
    bomb: str,
    over: asyncio.Event,
    submitted: asyncio.Queue[str],
    result: SandboxIsolation,
) -> None:
    """Runs `bomb` tasks one after another until `over`, counting how each call ended; says
    so on `submitted` when its first is accepted."""
    first = True
    while not over.is_set():
        body = {"input": "Go.", "agent": bomb.replace(" ", "-")}
        async with session.post(
            f"{stack.base_url}/api/v1/tasks", json=body, headers=attacker_headers(ATTACKER)
        ) as response:
            accepted = await response.json()
        if first:
            submitted.put_nowait(bomb)
            first = False
        await follow(session, stack.base_url + accepted["stream_url"], attacker_headers(ATTACKER))
        async with session.get(
            f"{stack.base_url}/api/v1/tasks/{accepted['task_id']}/chain",
            headers=attacker_headers(ATTACKER),
        ) as response:
            chain = await response.json()
        for step in chain["steps"]:
            result_info = step.get("tool_result") or {}
            if result_info.get("tool_name") == "run_shell":
                error = str(result_info.get("error") or "")
                limit = error.split("(", 1)[1].split(")", 1)[0] if "(" in error else "none"
                result.outcomes[f"{bomb}: {limit}"] += 1


async def _setup(database_url: str, stack: Stack) -> None:
    await attacker_tenant(database_url, ATTACKER)
    async with client() as session:
        for bomb, (delay, _) in BOMBS.items():
            definition = {
                "name": bomb.replace(" ", "-"),
                "model": stack.model_for(delay),
                "tools": ["run_shell"],
            }
            async with session.post(
                f"{stack.base_url}/api/v1/agents",
                json=definition,
                headers=attacker_headers(ATTACKER),
            ) as response:
                if response.status != 201:
                    raise RuntimeError(f"{bomb}: {response.status} {await response.text()}")


async def measure(stack: Stack, tasks: int) -> SandboxIsolation:
    result = SandboxIsolation()
    async with client() as session:
        await b_tasks(session, stack, [], [], count=5)  # warm-up
        await b_tasks(session, stack, result.baseline_ms, result.b_failures, count=tasks)
        over = asyncio.Event()
        submitted: asyncio.Queue[str] = asyncio.Queue()
        bombers = [
            asyncio.create_task(_bomber(session, stack, bomb, over, submitted, result))
            for bomb in BOMBS
            for _ in range(ATTACKERS_PER_BOMB)
        ]
        for _ in bombers:  # every bomber's first task accepted before B measures
            await submitted.get()
        await b_tasks(session, stack, result.attack_ms, result.b_failures, count=tasks)
        over.set()
        await asyncio.gather(*bombers)
    return result


def run(tasks: int = 60) -> SandboxIsolation:
    async def main() -> SandboxIsolation:
        with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
            directory = Path(tmp)
            async with postgres_database() as database_url, AsyncExitStack() as processes:
                llms = await fake_llms(processes, directory, [PLAIN_DELAY_S])
                for bomb, (delay, command) in BOMBS.items():
                    args = [sys.executable, str(FAKE_LLM), "--port", "0", "--model", MODEL]
                    args += ["--tool-call", "run_shell", "--reply", "done"]
                    args += ["--tool-arguments", json.dumps({"command": command})]
                    log = directory / f"llm-{bomb.replace(' ', '-')}.log"
                    llms[delay] = await processes.enter_async_context(child(args, log, {}))
                env = service_env(directory, database_url, llms, **SETTINGS)
                service = await processes.enter_async_context(start_service(directory, env))
                stack = Stack(service, llms, database_url)
                await _setup(database_url, stack)
                return await measure(stack, tasks)

    return run_async(main())
