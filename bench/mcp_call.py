"""What a call of an MCP server's tool through the whole `ToolExecutor` adds over a raw call of
the `mcp` SDK (`ClientSession.call_tool`) to the same server.

The fake MCP server (the SDK's own server over streamable HTTP) runs in its own process on
127.0.0.1 and answers `add` at once. Each side keeps one session open for all its calls: the
raw side an SDK `ClientSession` over the SDK's streamable-HTTP client, ours an `McpConnection`
(the client pinned to the address the SSRF guard checked) behind an `McpTool` in a registry,
called through the executor (argument validation against the server's schema, the tool_call
and tool_result steps, result conversion). Calls are sequential and interleaved in blocks so
drift on the machine affects both sides alike.
"""

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.chain import ReasoningChain
from app.tools.executor import ToolExecutor
from app.tools.mcp import McpConnection, McpTool, discover, named
from app.tools.models import ToolCallContext
from app.tools.registry import ToolRegistry
from app.tools.services import NetworkPolicy

_SERVER = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "mcp_server.py"
WARM_UP = 100
_BLOCKS = 10
# A run's chain holds its calls' steps; a fresh one now and then keeps it run-sized.
_CALLS_PER_CHAIN = 50


@dataclass(frozen=True)
class McpLatency:
    samples: int
    raw_ms: list[float]
    executor_ms: list[float]
    raw_cpu_ms: float
    executor_cpu_ms: float
    handshakes: int

    @staticmethod
    def _percentile(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]

    def raw(self, q: float) -> float:
        return self._percentile(self.raw_ms, q)

    def executor(self, q: float) -> float:
        return self._percentile(self.executor_ms, q)

    def added(self, q: float) -> float:
        return self.executor(q) - self.raw(q)


@contextmanager
def fake_server() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(_SERVER), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the fake MCP server did not start: {line!r}")
        yield line.removeprefix("READY ")
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _time(call: Callable[[int], Awaitable[object]], first: int, count: int) -> list[float]:
    latencies = []
    for index in range(first, first + count):
        started = time.perf_counter()
        await call(index)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def _measure(url: str, samples: int) -> McpLatency:
    async def no_headers() -> dict[str, str]:
        return {}

    connection = McpConnection(
        url,
        server="bench",
        headers=no_headers,
        network=NetworkPolicy.of(["127.0.0.1/32"]),
        timeout_s=30,
    )
    async with AsyncExitStack() as stack:
        stack.push_async_callback(connection.aclose)
        read, write = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()

        tools, _ = named("bench", discover("bench", await connection.list_tools()).tools)
        executor = ToolExecutor(
            ToolRegistry([McpTool(connection, name, spec, timeout_s=30) for name, spec in tools])
        )
        chains: list[ReasoningChain] = []

        async def raw(index: int) -> object:
            result = await session.call_tool("add", {"a": index, "b": 1})
            assert not result.is_error
            return result

        async def through_executor(index: int) -> object:
            if index % _CALLS_PER_CHAIN == 0 or not chains:
                chains.append(ReasoningChain(task_id="bench", agent_id="bench"))
            chain = chains[-1]
            context = ToolCallContext(task_id="bench", agent_id="bench", chain_id=chain.id)
            result = await executor.execute(chain, context, "bench__add", {"a": index, "b": 1})
            assert result.success, result.error
            return result

        await _time(raw, 0, WARM_UP)
        await _time(through_executor, 0, WARM_UP)
        raw_ms: list[float] = []
        executor_ms: list[float] = []
        raw_cpu = executor_cpu = 0.0
        per_block = max(samples // _BLOCKS, 1)
        for block in range(_BLOCKS):
            first = block * per_block
            cpu = time.process_time()
            raw_ms += await _time(raw, first, per_block)
            raw_cpu += time.process_time() - cpu
            cpu = time.process_time()
            executor_ms += await _time(through_executor, first, per_block)
            executor_cpu += time.process_time() - cpu
        count = per_block * _BLOCKS
        return McpLatency(
            samples=count,
            raw_ms=raw_ms,
            executor_ms=executor_ms,
            raw_cpu_ms=raw_cpu * 1000 / count,
            executor_cpu_ms=executor_cpu * 1000 / count,
            handshakes=connection.opened,
        )


def run(samples: int = 1000) -> McpLatency:
    with fake_server() as url:
        return asyncio.run(_measure(url, samples))
