"""The governance guards on the executor: tenant quotas (waiting, refusing, reserving and
settling to real usage), and model policy, with a clock the tests move."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.chain import ErrorCode, ToolType
from app.governance.limits import InProcessLimitStore, cost_units
from app.governance.models import ModelPolicy, ModelPolicyGuard
from app.governance.quotas import QuotaGuard, TenantQuotas
from app.tools.base import BaseTool
from app.tools.errors import GuardRejection
from app.tools.executor import ToolExecutor
from app.tools.models import CallEstimate, ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from tests.factories import context_for, fake_deployment, new_chain, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply


class Clock:
    """Time that passes only when a test (or a guard's wait) says so."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class MeteredTool(BaseTool):
    """An LLM-like tool: its estimate and its real usage are what the test says."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name="metered", type=ToolType.LLM, description="uses tokens"
        )
        self.estimate_tokens = 600
        self.estimate_usd: Decimal | None = Decimal("0.006")
        self.real_tokens = 900
        self.real_usd = Decimal("0.009")

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput(
            "ok",
            model="m",
            input_tokens=self.real_tokens,
            output_tokens=0,
            cost_usd=self.real_usd,
        )

    async def estimate(self, arguments: dict[str, Any], context: ToolCallContext) -> CallEstimate:
        return CallEstimate(self.estimate_tokens, 0, self.estimate_usd)


def _guarded(
    quotas: dict[str, Any], clock: Clock, store: InProcessLimitStore | None = None
) -> tuple[ToolExecutor, MeteredTool, InProcessLimitStore]:
    store = store or InProcessLimitStore(clock=clock)
    guard = QuotaGuard(
        store, "acme", TenantQuotas.model_validate(quotas), clock=clock, sleep=clock.sleep
    )
    tool = MeteredTool()
    return ToolExecutor(ToolRegistry([tool]), guards=[guard]), tool, store


async def _call(executor: ToolExecutor) -> None:
    chain = new_chain()
    await executor.execute(chain, context_for(chain), "metered", {})


async def test_token_windows_count_real_usage_not_estimates() -> None:
    clock = Clock()
    executor, tool, store = _guarded({"tokens_per_minute": 1_000, "max_wait_s": 0}, clock)
    await _call(executor)  # reserved 600 by its estimate, settled to its real 900
    assert await store.usage("acme:tokens_per_minute", 60) == 900

    tool.estimate_tokens = 200  # 900 + 200 > 1000, though the estimates (800) would fit
    with pytest.raises(GuardRejection) as refused:
        await _call(executor)
    assert refused.value.error_code is ErrorCode.RATE_LIMITED
    assert refused.value.details["limit"] == "tokens_per_minute"
    assert refused.value.details["limit_value"] == 1_000
    assert refused.value.details["retry_after_s"] == 60

    clock.now += 60.5  # the first call left the window
    tool.real_tokens = 100
    await _call(executor)  # reserved 200, settled down to 100: the rest is free again
    assert await store.usage("acme:tokens_per_minute", 60) == 100


async def test_cost_windows_reserve_the_estimate_and_settle_to_the_real_cost() -> None:
    clock = Clock()
    executor, tool, store = _guarded({"cost_per_hour_usd": "0.02", "max_wait_s": 0}, clock)
    tool.real_usd = Decimal("0.001")
    await _call(executor)
    assert await store.usage("acme:cost_per_hour_usd", 3_600) == cost_units(Decimal("0.001"))

    tool.real_usd = Decimal("0.0185")
    await _call(executor)  # 0.001 + an estimate of 0.006 fits; it really cost 0.0185
    with pytest.raises(GuardRejection) as refused:  # 0.0195 + 0.006 > 0.02
        await _call(executor)
    assert refused.value.details["limit"] == "cost_per_hour_usd"
    assert refused.value.details["limit_value"] == "0.02"


async def test_a_call_over_a_limit_waits_for_the_window_within_max_wait() -> None:
    clock = Clock()
    executor, _, _ = _guarded({"llm_calls_per_minute": 1, "max_wait_s": 90}, clock)
    await _call(executor)
    clock.now += 10
    await _call(executor)  # waited the 50 s until the first call left the window
    assert clock.slept == [pytest.approx(50.001)]


async def test_a_call_that_would_wait_longer_than_max_wait_ends_the_run() -> None:
    clock = Clock()
    executor, _, _ = _guarded({"llm_calls_per_minute": 1, "max_wait_s": 30}, clock)
    await _call(executor)
    clock.now += 10
    with pytest.raises(GuardRejection) as refused:
        await _call(executor)
    assert clock.slept == []
    assert refused.value.details["retry_after_s"] == 50
    assert refused.value.details["resets_at"]
    assert "llm_calls_per_minute (1)" in refused.value.message


async def test_tool_calls_are_limited_by_their_type_and_refusals_reserve_nothing() -> None:
    clock = Clock()
    executor, tool, store = _guarded(
        {"tool_calls_per_minute": {"llm": 99}, "tokens_per_minute": 500, "max_wait_s": 0},
        clock,
    )
    # `llm` calls are limited by llm_calls_per_minute, never by the tool-type table
    tool.estimate_tokens = 501  # alone more than the window holds: it never fits
    with pytest.raises(GuardRejection) as refused:
        await _call(executor)
    assert refused.value.details["retry_after_s"] is None
    assert "this call alone exceeds it" in refused.value.message
    assert await store.usage("acme:tokens_per_minute", 60) == 0


async def test_an_unapproved_model_is_refused_by_the_guard_whoever_asks(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = runtime_for(
        tmp_path,
        [fake_deployment(fake_llm, "primary"), fake_deployment(fake_llm, "backup")],
        default_model="primary",
    )
    policy = ModelPolicy(approved=["primary"])
    guard = ModelPolicyGuard(
        policy, default_model="primary", available=runtime.gateway.model_names()
    )
    chain = new_chain()
    engine = ReasoningEngine(
        chain,
        runtime.executor,
        AgentTask(input="hi"),
        default_model="primary",
        guards=[guard],
        models=policy,
    )
    fake_llm.script("primary", Reply.text("fine"))
    assert (await engine.call_llm(prompt="hi")).success
    with pytest.raises(GuardRejection) as refused:
        await engine.call_llm(prompt="hi", model="backup")

    assert refused.value.error_code is ErrorCode.MODEL_NOT_APPROVED
    assert refused.value.details == {"model": "backup", "approved": ["primary"]}
    assert fake_llm.requests_for("backup") == []
    result = chain.steps[-1].tool_result
    assert result is not None
    assert result.error_code is ErrorCode.MODEL_NOT_APPROVED
