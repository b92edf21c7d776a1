"""GET of a 1,000-step chain from Postgres: `GET /api/v1/chains/{id}`, sequential, keep-alive.

The chain is what a ReAct task that keeps calling the calculator leaves behind, written through
the service's own write path (ReasoningChain -> ReasoningStepEvent -> RunRecorder -> RunWrites),
one batch per iteration as a run writes it: per iteration an LLM call (tool_call with the last
messages, tool_result with usage and cost), a thought, a calculator call and its result, then a
final answer. The service's run limit (max_iterations <= 100) is why no real run is used.
"""

import json
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

from app.agents.prompts import NATIVE_SYSTEM_PROMPT
from app.chain import (
    ReasoningChain,
    ReasoningStep,
    StepType,
    SynthesisInfo,
    ThinkingInfo,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
    VisibilityConfig,
)
from app.storage import Database
from app.storage.runs import RunStores
from bench.recorded_run import RecordedRun, bench_runner
from bench.service_harness import TENANT, Stack, client, percentile, run_async, stack

STEPS = 1000
_MODEL = "gpt-4o-mini"
_TASK = "Work out, one operation at a time, the running total of the order lines listed below."


@dataclass(frozen=True)
class ChainRead:
    steps: int
    step_bytes_mean: float
    response_bytes: int
    requests: int
    latencies_ms: list[float]
    server_cpu_ms_per_request: float

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def _llm_steps(chain: ReasoningChain, n: int, messages: list[dict[str, Any]]) -> ReasoningStep:
    call = ToolCallInfo(
        tool_type=ToolType.LLM,
        tool_name="llm",
        arguments={
            "model": _MODEL,
            "messages": messages,
            "tools": ["calculator", "current_time"],
            "max_tokens": 4096,
        },
        model=_MODEL,
    )
    call_step = chain.add_step(ReasoningStep(type=StepType.TOOL_CALL, tool_call=call))
    expression = f"{1000 + 37 * n} * {3 + n % 7} + {n % 13}"
    value = {
        "content": f"Line {n} adds {expression}; I will compute it exactly before moving on.",
        "tool_calls": [
            {"id": f"call_{n}", "name": "calculator", "arguments": {"expression": expression}}
        ],
        "finish_reason": "tool_calls",
    }
    result = ToolResultInfo(
        correlation_id=call.correlation_id,
        success=True,
        result=value,
        duration_ms=812.5 + n % 50,
        model=_MODEL,
        provider="openai",
        deployment=f"{_MODEL}#1",
        input_tokens=900 + 60 * n,
        output_tokens=48,
        total_tokens=948 + 60 * n,
        cost_usd=Decimal("0.000163") + Decimal(n) / 10**7,
    )
    summary = f"{_MODEL} · {result.input_tokens} in / 48 out tokens"
    return chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=result,
            visibility=VisibilityConfig(summary=summary),
            parent_step_id=call_step.id,
        )
    )


def _iteration(chain: ReasoningChain, n: int) -> None:
    recent = [
        {"role": "assistant", "content": f"Line {i} is next.", "tool_calls": [{"id": f"call_{i}"}]}
        for i in range(max(0, n - 3), n)
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": NATIVE_SYSTEM_PROMPT},
        {"role": "user", "content": _TASK},
        *recent,
    ]
    reply = _llm_steps(chain, n, messages)
    value = reply.tool_result.result if reply.tool_result else {}
    chain.add_step(
        ReasoningStep(
            type=StepType.THINKING,
            thinking=ThinkingInfo(thought=value["content"] + " " + _TASK * 2),
            parent_step_id=reply.id,
        )
    )
    expression = value["tool_calls"][0]["arguments"]["expression"]
    left, _, rest = expression.partition(" * ")
    factor, _, addend = rest.partition(" + ")
    call = ToolCallInfo(
        tool_type=ToolType.SKILL, tool_name="calculator", arguments={"expression": expression}
    )
    call_step = chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_CALL,
            tool_call=call,
            visibility=VisibilityConfig(summary="Calling calculator"),
            parent_step_id=reply.id,
        )
    )
    answer = {"expression": expression, "result": int(left) * int(factor) + int(addend)}
    chain.add_step(
        ReasoningStep(
            type=StepType.TOOL_RESULT,
            tool_result=ToolResultInfo(
                correlation_id=call.correlation_id, success=True, result=answer, duration_ms=0.2
            ),
            visibility=VisibilityConfig(summary=f"{expression} = {answer['result']}"),
            parent_step_id=call_step.id,
        )
    )


async def build_chain(database_url: str, steps: int = STEPS) -> UUID:
    """Stores a completed `steps`-step chain of tenant TENANT; returns its id."""
    database = Database(database_url)
    stores = RunStores.of(database)
    async with bench_runner(stores) as runner_id:
        run = await RecordedRun.start(
            stores, TENANT, runner_id, request={"input": _TASK}, model=_MODEL, agent_id="react"
        )
        chain = run.chain
        iterations = (steps - 5) // 5
        for n in range(iterations):
            _iteration(chain, n)
            await run.flush()
        while len(chain.steps) < steps - 3:
            chain.add_step(
                ReasoningStep(type=StepType.THINKING, thinking=ThinkingInfo(thought=_TASK))
            )
        _llm_steps(chain, iterations, [{"role": "user", "content": _TASK}])
        sources = [s.id for s in chain.steps if s.type is StepType.TOOL_RESULT][-20:]
        conclusion = f"The running total after {iterations} lines is known."
        chain.add_step(
            ReasoningStep(
                type=StepType.SYNTHESIS,
                synthesis=SynthesisInfo(conclusion=conclusion, sources=sources),
            )
        )
        await run.complete()
    await database.dispose()
    return chain.id


async def measure(stack: Stack, requests: int, steps: int = STEPS) -> ChainRead:
    chain_id = await build_chain(stack.database_url, steps)
    url, headers = f"{stack.base_url}/api/v1/chains/{chain_id}", stack.headers()
    async with client(limit=1) as session:
        async with session.get(url, headers=headers) as response:
            body = await response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {url}: HTTP {response.status}: {body[:500]!r}")
        documents = [len(s) for s in _step_documents(body)]
        if len(documents) != steps:
            raise RuntimeError(f"the chain has {len(documents)} steps, not {steps}")
        for _ in range(10):  # warm up
            async with session.get(url, headers=headers) as response:
                await response.read()
        latencies: list[float] = []
        cpu = stack.service.cpu_s()
        for _ in range(requests):
            started = time.perf_counter()
            async with session.get(url, headers=headers) as response:
                await response.read()
            latencies.append((time.perf_counter() - started) * 1000)
        cpu = stack.service.cpu_s() - cpu
    return ChainRead(
        steps=steps,
        step_bytes_mean=sum(documents) / len(documents),
        response_bytes=len(body),
        requests=requests,
        latencies_ms=latencies,
        server_cpu_ms_per_request=cpu * 1000 / requests,
    )


def _step_documents(body: bytes) -> list[bytes]:
    return [json.dumps(step, separators=(",", ":")).encode() for step in json.loads(body)["steps"]]


def run(requests: int = 500, steps: int = STEPS) -> ChainRead:
    async def main() -> ChainRead:
        async with stack() as service:
            return await measure(service, requests, steps)

    return run_async(main())
