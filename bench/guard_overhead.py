"""What the governance guards add to one LLM call: a task budget (cost, tokens, LLM calls,
steps), a tenant model policy and tenant quotas (LLM calls per minute, tokens per minute and per
hour, cost per hour and per day), before and after the call, on the in-process limit store and
on Redis.

The calls are real `llm` tool calls' arguments (ReAct conversations growing to about 1,500
tokens, two tools offered), so the pre-call estimate (LiteLLM's tokenizer over what is new in
the prompt, the dearest deployment's price) is part of what is measured: it exists only for the
guards. The estimate of a whole prompt nothing of which was counted before is reported beside.
"""

import asyncio
import time
from dataclasses import dataclass
from decimal import Decimal
from statistics import quantiles
from uuid import uuid4

from app.chain import (
    Budget,
    ReasoningChain,
    ReasoningStep,
    StepType,
    ToolCallInfo,
    ToolResultInfo,
    ToolType,
)
from app.governance.budgets import BudgetGuard
from app.governance.limits import InProcessLimitStore, LimitStore, RedisLimitStore
from app.governance.models import ModelPolicy, ModelPolicyGuard
from app.governance.quotas import QuotaGuard, TenantQuotas
from app.llm import LLMGateway, load_model_list
from app.tools.builtin import builtin_tools
from app.tools.builtin.llm import LLM_TOOL_NAME, LLMTool
from app.tools.guards import PendingCall, ToolGuard
from app.tools.models import ToolCallContext
from app.tools.registry import ToolRegistry

REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class GuardOverhead:
    backend: str
    calls: int
    latencies_ms: list[float]
    estimate_ms: list[float]

    def p(self, percent: int, values: list[float] | None = None) -> float:
        data = sorted(values if values is not None else self.latencies_ms)
        if percent >= 100:
            return data[-1]
        return quantiles(data, n=100, method="inclusive")[percent - 1]


def _conversation(call: int, turns_per_task: int = 10) -> list[dict[str, object]]:
    """The prompt of a task's `call`-th LLM call: a ReAct conversation growing by an assistant
    message and an observation per call (new text each time, as in a real run), a new task
    every `turns_per_task` calls; about 1,500 tokens at its longest."""
    task, turn = divmod(call, turns_per_task)
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful assistant. " * 40},
        {"role": "user", "content": f"Task {task}: what is 17 * 23 + 4, and the time? " * 3},
    ]
    for past in range(turn):
        messages.append(
            {"role": "assistant", "content": f"Task {task} step {past}: the calculator. " * 8}
        )
        messages.append({"role": "user", "content": f"Observation {task}.{past}: 395. " * 12})
    return messages


async def _measure(backend: str, store: LimitStore, calls: int) -> GuardOverhead:
    gateway = LLMGateway(load_model_list(None))
    registry = ToolRegistry(builtin_tools())
    llm = LLMTool(gateway, registry)
    registry.register(llm)
    chain = ReasoningChain(
        task_id="bench",
        agent_id="bench",
        budget=Budget(
            max_cost_usd=Decimal(1_000),
            max_tokens=10**12,
            max_llm_calls=10**9,
            max_steps=10**9,
            max_duration_s=86_400,
        ),
    )
    tenant = f"bench-{uuid4().hex[:8]}"
    policy = ModelPolicy(approved=["demo*", "gpt-4o*"], max_output_tokens={"demo": 2048})
    quotas = TenantQuotas(
        llm_calls_per_minute=10**9,
        tokens_per_minute=10**15,
        tokens_per_hour=10**15,
        cost_per_hour_usd=Decimal(10**6),
        cost_per_day_usd=Decimal(10**6),
    )
    guards: list[ToolGuard] = [
        BudgetGuard(chain),
        ModelPolicyGuard(policy, default_model="demo", available=gateway.model_names()),
        QuotaGuard(store, tenant, quotas),
    ]
    context = ToolCallContext(task_id="bench", agent_id="bench", chain_id=chain.id, models=policy)
    latencies: list[float] = []
    estimates: list[float] = []
    for index in range(calls + 200):
        arguments = {
            "model": "demo",
            "messages": _conversation(index),
            "tools": ["calculator", "current_time"],
            "max_tokens": 1024,
        }
        step = ReasoningStep(
            type=StepType.TOOL_CALL,
            tool_call=ToolCallInfo(tool_type=ToolType.LLM, tool_name=LLM_TOOL_NAME, model="demo"),
        )
        assert step.tool_call is not None
        # Each call its own, as the executor gives each: windows count calls by their id.
        call_context = context.at(correlation_id=step.tool_call.correlation_id, call_step=step)
        pending = PendingCall(llm, llm.definition, arguments, call_context, step)
        result = ToolResultInfo(
            correlation_id=step.tool_call.correlation_id,
            success=True,
            duration_ms=1.0,
            model="demo",
            input_tokens=1_500,
            output_tokens=100,
            total_tokens=1_600,
            cost_usd=Decimal("0.0021"),
        )
        started = time.perf_counter()
        for guard in guards:
            await guard.before_call(pending)
        for guard in guards:
            await guard.after_call(pending, result)
        ended = time.perf_counter()
        if index >= 200:  # warm-up: tokenizer caches, Redis scripts loaded
            latencies.append((ended - started) * 1000)
            # the estimate alone, on a fresh conversation of the same length (nothing cached)
            fresh = {**arguments, "messages": _conversation(index + 10**6)}
            again = PendingCall(llm, llm.definition, fresh, context, step)
            t0 = time.perf_counter()
            await again.estimate()
            estimates.append((time.perf_counter() - t0) * 1000)
    return GuardOverhead(backend, calls, latencies, estimates)


async def _run(calls: int) -> list[GuardOverhead]:
    results = [await _measure("in-process", InProcessLimitStore(), calls)]
    prefix = f"omniforge-bench:{uuid4().hex[:8]}:"
    redis_store = RedisLimitStore(REDIS_URL, prefix=prefix)
    try:
        results.append(await _measure("redis", redis_store, calls))
    finally:
        await _delete_keys(prefix)
        await redis_store.aclose()
    return results


async def _delete_keys(prefix: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}*"):
            await client.delete(key)
    finally:
        await client.aclose()


def run(calls: int = 2_000) -> list[GuardOverhead]:
    return asyncio.run(_run(calls))
