"""What one streamed output delta costs the service: server CPU per `output_delta` event of a
task submitted with `stream_output`, on the whole path (the fake LLM server streams one word
per chunk -> LiteLLM -> the LLM tool -> the run's channel -> SSE bytes to one subscriber).

Two fake LLM servers, each in its own process, answer "ok" SHORT and LONG times. Tasks run one
after another, each followed to `done` by one subscriber (its own POST with `Accept:
text/event-stream`). The service's CPU (user + system, /proc/<pid>/stat) per long task minus
that per short task, over the difference in deltas, is the CPU per delta. The same long tasks
without `stream_output` (one non-streamed response of the same text) give what streaming costs
per delta over not streaming. Kinds are interleaved round by round, so drift hits all alike.

Also in-process, with no LiteLLM and no socket: the service's own part of a delta alone (the
run stamping it, its event's JSON and SSE frame, the channel, one subscriber's stream).
"""

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from uuid import uuid4

import aiohttp
import yaml

from app.agents.run_events import StampedOutput
from app.runs.live import LiveRun
from app.security import mint_token
from app.tools.models import OutputDelta
from bench.service_harness import (
    FAKE_LLM,
    JWT_SECRET,
    MODEL,
    TENANT,
    Proc,
    child,
    client,
    postgres_database,
    run_async,
    sse_events,
)

SHORT_WORDS = 10
LONG_WORDS = 1000


@dataclass(frozen=True)
class DeltaCost:
    rounds: int
    tasks_per_round: int
    short_words: int
    long_words: int
    short_cpu_s: float  # server CPU over every short task, streamed
    long_cpu_s: float  # over every long task, streamed
    unstreamed_cpu_s: float  # over every long task, not streamed
    deltas_per_long_task: int  # as the subscriber received them
    own_us: float  # the service's own part of one delta, in-process

    @property
    def tasks(self) -> int:
        return self.rounds * self.tasks_per_round

    @property
    def cpu_us_per_delta(self) -> float:
        extra_deltas = (self.long_words - self.short_words) * self.tasks
        return (self.long_cpu_s - self.short_cpu_s) * 1e6 / extra_deltas

    @property
    def streaming_us_per_delta(self) -> float:
        return (self.long_cpu_s - self.unstreamed_cpu_s) * 1e6 / (self.long_words * self.tasks)

    def per_task_ms(self, cpu_s: float) -> float:
        return cpu_s * 1000 / self.tasks


def run(rounds: int = 5, tasks_per_round: int = 10) -> DeltaCost:
    own_us = _own_part(deltas=20_000)
    return run_async(_measure(rounds, tasks_per_round, own_us))


async def _measure(rounds: int, tasks_per_round: int, own_us: float) -> DeltaCost:
    async with _service() as (service, base_url), client(limit=1) as session:
        token = mint_token(JWT_SECRET, tenant_id=TENANT, subject="bench", roles=["member"])
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}

        async def tasks(model: str, stream_output: bool) -> tuple[float, int]:
            before = service.cpu_s()
            deltas = 0
            for _ in range(tasks_per_round):
                deltas = await _one_task(session, base_url, headers, model, stream_output)
            return service.cpu_s() - before, deltas

        for model in ("short", "long"):  # LiteLLM loads its code lazily on first calls
            for _ in range(3):
                await _one_task(session, base_url, headers, model, True)
        short = long = unstreamed = 0.0
        received = 0
        for _ in range(rounds):
            short += (await tasks("short", True))[0]
            cpu, received = await tasks("long", True)
            long += cpu
            unstreamed += (await tasks("long", False))[0]
    return DeltaCost(
        rounds, tasks_per_round, SHORT_WORDS, LONG_WORDS, short, long, unstreamed, received, own_us
    )


async def _one_task(
    session: aiohttp.ClientSession,
    base_url: str,
    headers: dict[str, str],
    model: str,
    stream_output: bool,
) -> int:
    """Submits a task as its own stream and reads it to `done`; returns the deltas received."""
    body = {"input": "Say ok.", "model": model, "stream_output": stream_output}
    async with session.post(f"{base_url}/api/v1/tasks", json=body, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {await response.text()}")
        deltas = 0
        async for event in sse_events(response):
            if event.type == "output_delta":
                deltas += 1
            elif event.type == "chain_failed":
                failure = json.loads(event.data)
                raise RuntimeError(f"a benchmark task failed: {failure['error_message']}")
            elif event.type == "done":
                return deltas
    raise RuntimeError("the stream ended without `done`")


@asynccontextmanager
async def _service() -> AsyncIterator[tuple[Proc, str]]:
    """The service on a fresh Postgres database, its models `short` and `long` answered by
    fake LLM servers of their own."""
    with tempfile.TemporaryDirectory(prefix="omniforge-bench-") as tmp:
        directory = Path(tmp)
        async with postgres_database() as database_url, AsyncExitStack() as processes:
            deployments = []
            for name, words in (("short", SHORT_WORDS), ("long", LONG_WORDS)):
                args = [sys.executable, str(FAKE_LLM), "--port", "0", "--model", MODEL]
                args += ["--words", str(words)]
                llm = await processes.enter_async_context(
                    child(args, directory / f"llm-{name}.log", {})
                )
                deployments.append(_deployment(name, llm.ready))
            models = directory / "models.yaml"
            models.write_text(yaml.safe_dump({"model_list": deployments}), encoding="utf-8")
            env = {
                "OMNIFORGE_ENV": "development",
                "OMNIFORGE_DATA_DIR": str(directory),
                "OMNIFORGE_DATABASE_URL": database_url,
                "OMNIFORGE_JWT_SECRET": JWT_SECRET,
                "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",
                "OMNIFORGE_MODELS_FILE": str(models),
            }
            args = [sys.executable, "-m", "bench.service_server"]
            service = await processes.enter_async_context(
                child(args, directory / "service.log", env)
            )
            yield service, service.ready


def _deployment(name: str, api_base: str) -> dict[str, Any]:
    return {
        "model_name": name,
        "litellm_params": {"model": f"openai/{MODEL}", "api_base": api_base, "api_key": "x"},
        "model_info": {
            "input_cost_per_token": 0.000001,
            "output_cost_per_token": 0.000002,
            "supports_function_calling": True,
        },
    }


def _own_part(deltas: int) -> float:
    """µs of CPU per delta from the LLM tool's hand-off to the frame one subscriber sends."""
    return asyncio.run(_own_part_async(deltas))


async def _own_part_async(deltas: int) -> float:
    # A live run as far as streaming output needs one: its ids and its channel.
    recorder = SimpleNamespace(chain=SimpleNamespace(id=uuid4()))
    live = LiveRun(uuid4(), cast(Any, None), cast(Any, recorder), cast(Any, None))
    stamp = StampedOutput(live.stream_output)  # the run has emitted nothing yet: after 0
    follower = live.channel.follow(after=0)
    piece = OutputDelta(uuid4(), uuid4(), 1, "content", "ok ")
    sent = 0
    started = time.process_time()
    for _ in range(deltas):
        stamp(piece)
        sent += len((await anext(follower)).frame)  # type: ignore[union-attr]
    elapsed = time.process_time() - started
    assert sent > 0
    return elapsed * 1e6 / deltas
