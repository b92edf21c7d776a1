"""The LLM gateway's added latency over a raw httpx call to the same OpenAI-compatible server.

The fake server runs in its own process and answers at once, so what differs between the two
clients is the client side: LiteLLM's Router, request building, response parsing, our cost
calculation and failed-attempt tracking. Calls are sequential and interleaved in blocks so
drift on the machine affects both sides alike.
"""

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.llm import LLMGateway, LLMRequest
from app.llm.config import DeploymentConfig, ModelList

_SERVER = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "openai_server.py"
_MODEL = "bench-model"
_MESSAGES = [{"role": "user", "content": "Say ok."}]


@dataclass(frozen=True)
class Latency:
    samples: int
    raw_ms: list[float]
    gateway_ms: list[float]
    gateway_cpu_ms: float

    @staticmethod
    def _percentile(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]

    def raw(self, q: float) -> float:
        return self._percentile(self.raw_ms, q)

    def gateway(self, q: float) -> float:
        return self._percentile(self.gateway_ms, q)

    def added(self, q: float) -> float:
        return self.gateway(q) - self.raw(q)


@contextmanager
def fake_server() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(_SERVER), "--port", "0", "--model", _MODEL],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the fake server did not start: {line!r}")
        yield line.removeprefix("READY ")
    finally:
        process.terminate()
        process.wait(timeout=10)


def gateway_for(base_url: str, *, openai_sdk: bool = False) -> LLMGateway:
    deployment = DeploymentConfig(
        model_name=_MODEL,
        litellm_params={"model": f"openai/{_MODEL}", "api_base": base_url, "api_key": "bench"},
        model_info={"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002},
    )
    return LLMGateway(
        ModelList(model_list=[deployment]), default_model=_MODEL, openai_sdk=openai_sdk
    )


async def _time(call: Callable[[], Awaitable[object]], count: int) -> tuple[list[float], float]:
    latencies = []
    cpu = time.process_time()
    for _ in range(count):
        started = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, (time.process_time() - cpu) * 1000 / count


async def _measure(base_url: str, samples: int, blocks: int, openai_sdk: bool) -> Latency:
    gateway = gateway_for(base_url, openai_sdk=openai_sdk)
    request = LLMRequest(model=_MODEL, messages=_MESSAGES)
    headers = {"Authorization": "Bearer bench"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as client:

        async def raw() -> object:
            response = await client.post(
                "/chat/completions", json={"model": _MODEL, "messages": _MESSAGES}
            )
            response.raise_for_status()
            return response.json()

        async def through_gateway() -> object:
            return await gateway.complete(request)

        for call in (raw, through_gateway):  # warm connections, imports and caches
            await _time(call, 200)
        raw_ms: list[float] = []
        gateway_ms: list[float] = []
        cpu_ms: list[float] = []
        per_block = samples // blocks
        for _ in range(blocks):
            block, _cpu = await _time(raw, per_block)
            raw_ms += block
            block, cpu = await _time(through_gateway, per_block)
            gateway_ms += block
            cpu_ms.append(cpu)
    return Latency(per_block * blocks, raw_ms, gateway_ms, statistics.mean(cpu_ms))


def run(samples: int = 2000, blocks: int = 10, *, openai_sdk: bool = False) -> Latency:
    with fake_server() as base_url:
        return asyncio.run(_measure(base_url, samples, blocks, openai_sdk))
