"""A ReAct agent over the fake provider for the ReAct tests (test_react_*.py): its runtime,
a run to the end, the chain's shape, and what its LLM calls should cost."""

from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.agents import AgentRuntime, AgentTask
from app.chain import ChainEvent, ReasoningChain, ToolResultInfo
from app.tools.base import BaseTool
from app.tools.builtin import CalculatorTool, CurrentTimeTool
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer

IN_PRICE, OUT_PRICE = Decimal("0.0000025"), Decimal("0.00001")
NOON_UTC = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


def _tools() -> list[BaseTool]:
    return [CalculatorTool(), CurrentTimeTool(clock=lambda: NOON_UTC)]


def _runtime(
    server: FakeLLMServer,
    tmp_path: Path,
    *,
    native: bool,
    tools: Sequence[BaseTool] | None = None,
    **options: Any,
) -> AgentRuntime:
    deployment = fake_deployment(
        server,
        "agent-model",
        input_cost=str(IN_PRICE),
        output_cost=str(OUT_PRICE),
        native_tools=native,
        deployment_id="agent-dep",
    )
    options.setdefault("llm_initial_backoff_s", 0.01)
    return runtime_for(
        tmp_path,
        [deployment],
        default_model="agent-model",
        tools=_tools() if tools is None else tools,
        **options,
    )


async def _run(runtime: AgentRuntime, task: AgentTask) -> tuple[list[ChainEvent], ReasoningChain]:
    run = runtime.agent.start(task)
    events = [event async for event in run.events()]
    return events, run.chain


def _shape(chain: ReasoningChain) -> list[tuple[str, str]]:
    """Each step as (type, tool name or text)."""
    shape = []
    for step in chain.steps:
        if step.tool_call is not None:
            shape.append((step.type.value, step.tool_call.tool_name))
        elif step.tool_result is not None:
            call = chain.step_by_correlation_id(step.tool_result.correlation_id)
            assert call is not None
            assert call.tool_call is not None
            shape.append((step.type.value, call.tool_call.tool_name))
        elif step.thinking is not None:
            shape.append((step.type.value, step.thinking.thought))
        else:
            assert step.synthesis is not None
            shape.append((step.type.value, step.synthesis.conclusion))
    return shape


def _llm_results(chain: ReasoningChain) -> list[ToolResultInfo]:
    return [
        s.tool_result
        for s in chain.steps
        if s.tool_result is not None and s.tool_result.model is not None
    ]


def _cost(input_tokens: int, output_tokens: int) -> Decimal:
    return IN_PRICE * input_tokens + OUT_PRICE * output_tokens


def _assert_usage_and_cost(
    chain: ReasoningChain, usage: list[tuple[int, int]]
) -> list[ToolResultInfo]:
    """Each LLM call reports the scripted tokens and costs exactly their price; so does the
    chain in total."""
    llm = _llm_results(chain)
    assert [(r.input_tokens, r.output_tokens) for r in llm] == usage
    assert [r.cost_usd for r in llm] == [_cost(*u) for u in usage]
    assert chain.metrics.total_cost_usd == sum(_cost(*u) for u in usage)
    return llm
