"""`on_limit: answer` on the real ReAct agent, its budget enforced by the real guard: at
`max_iterations` the agent makes one more, tool-less call; under a budget it keeps that call
back from the start and makes it when the next ordinary call would leave too little. The run
ends `incomplete` with the answer and the limit's name, and never spends past its budget."""

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentTask
from app.agents.base import ToolCallingMode
from app.agents.on_limit import FINAL_MIN_TOKENS
from app.agents.spec import AgentSpec
from app.chain import (
    Budget,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    StepType,
    TaskState,
)
from app.governance.budgets import BudgetGuard
from app.llm import LLMRequest
from app.tools.builtin import CalculatorTool, CurrentTimeTool
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

MODEL = "agent-model"
IN_PRICE, OUT_PRICE = Decimal("0.0000025"), Decimal("0.00001")
MAX_OUTPUT = 1000
ANSWER = "From what I have: 17 * 23 = 391."
# A model that works hard: most of its output cap on every call.
WORK = Reply.tool_calls(
    [ToolCall("calculator", {"expression": "17 * 23"})], prompt_tokens=50, completion_tokens=900
)
FINAL = Reply.text(ANSWER, prompt_tokens=60, completion_tokens=100)


def _runtime(
    server: FakeLLMServer, tmp_path: Path, mode: ToolCallingMode = "native", **settings: Any
) -> AgentRuntime:
    deployment = fake_deployment(
        server,
        MODEL,
        input_cost=str(IN_PRICE),
        output_cost=str(OUT_PRICE),
        native_tools=mode == "native",
    )
    # The tools the budgets below were worked out with (each tool's schema is prompt).
    tools = [CalculatorTool(), CurrentTimeTool()]
    return runtime_for(
        tmp_path, [deployment], default_model=MODEL, mode=mode, tools=tools, **settings
    )


async def _run(
    runtime: AgentRuntime, spec: AgentSpec, budget: Budget | None = None
) -> tuple[list[ChainEvent], ReasoningChain]:
    task = AgentTask(input="What is 17 * 23, and why?")
    chain = ReasoningChain(task_id=task.id, agent_id="test@1", budget=budget)
    guards = [] if budget is None else [BudgetGuard(chain)]
    run = runtime.agent_for(spec).start(task, chain=chain, guards=guards)
    events = [event async for event in run.events()]
    return events, run.chain


def _incomplete(events: list[ChainEvent], chain: ReasoningChain, reason: str) -> None:
    """The run ended `incomplete` at `reason`, with the final call's answer."""
    completed, done = events[-2:]
    assert isinstance(completed, ChainCompletedEvent), completed
    assert isinstance(done, DoneEvent)
    assert done.final_state is TaskState.INCOMPLETE
    assert (completed.answer, completed.stop_reason) == (ANSWER, reason)
    assert chain.status is ChainStatus.INCOMPLETE
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert (synthesis.conclusion, synthesis.stop_reason) == (ANSWER, reason)


def _cost(chain: ReasoningChain) -> Decimal:
    return sum(
        (s.tool_result.cost_usd or Decimal(0) for s in chain.steps if s.tool_result is not None),
        Decimal(0),
    )


def _llm_steps(chain: ReasoningChain) -> list[Any]:
    return [s for s in chain.steps if s.tool_call is not None and s.tool_call.tool_name == "llm"]


@pytest.mark.parametrize("mode", ["native", "text"])
async def test_at_max_iterations_the_agent_answers_in_one_more_call_without_tools(
    fake_llm: FakeLLMServer, tmp_path: Path, mode: ToolCallingMode
) -> None:
    runtime = _runtime(fake_llm, tmp_path, mode)
    if mode == "native":
        fake_llm.script(MODEL, WORK, WORK, FINAL)
    else:
        act = 'Thought: multiply.\nAction: calculator\nAction Input: {"expression": "17 * 23"}'
        fake_llm.script(
            MODEL, Reply.text(act), Reply.text(act), Reply.text(f"Final Answer: {ANSWER}")
        )

    events, chain = await _run(
        runtime, AgentSpec(max_iterations=2, on_limit="answer", max_output_tokens=MAX_OUTPUT)
    )

    _incomplete(events, chain, "max_iterations")
    # N iterations with tools, then call N+1 without.
    assert len(fake_llm.requests) == 3
    final = fake_llm.requests[-1].body
    assert "tools" not in final
    note = final["messages"][-1]
    assert note["role"] == "user"
    assert "you have used all 2 iterations this task allows" in note["content"]
    assert note["content"].startswith("Observation: " if mode == "text" else "Note: ")
    # The answer rests on what the tools found and on the final call.
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    calculator_results = [
        s.id
        for s in chain.steps
        if s.tool_result is not None
        and s.tool_result.result == {"expression": "17 * 23", "result": 391}
    ]
    assert synthesis.sources == [*calculator_results, chain.steps[-2].id]


async def test_with_on_limit_fail_max_iterations_still_fails_the_task(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, WORK)

    events, chain = await _run(runtime, AgentSpec(max_iterations=2))

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.MAX_ITERATIONS
    assert len(fake_llm.requests) == 2
    assert chain.status is ChainStatus.FAILED


async def test_a_run_that_answers_within_its_iterations_is_completed_either_way(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, FINAL)

    events, chain = await _run(runtime, AgentSpec(max_iterations=2, on_limit="answer"))

    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent)
    assert completed.stop_reason is None
    assert chain.status is ChainStatus.COMPLETED
    assert "tools" in fake_llm.requests[-1].body


async def test_the_final_answer_is_checked_against_the_response_format_without_a_retry(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    schema = {"type": "object", "properties": {"product": {"type": "integer"}}}
    fake_llm.script(MODEL, WORK, Reply.text('{"product": 391}'), WORK, Reply.text("about 400"))
    spec = AgentSpec(max_iterations=1, on_limit="answer", response_format=schema)

    events, chain = await _run(runtime, spec)

    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent)
    assert (completed.output, completed.stop_reason) == ({"product": 391}, "max_iterations")

    events, chain = await _run(runtime, spec)

    completed = events[-2]
    assert isinstance(completed, ChainCompletedEvent)
    assert (completed.answer, completed.output) == ("about 400", None)
    assert completed.stop_reason == "max_iterations"
    thought = chain.steps[-2].thinking
    assert thought is not None
    assert "does not match the response format" in thought.thought


async def test_under_an_llm_call_budget_the_last_call_allowed_is_the_final_one(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, WORK, FINAL)

    events, chain = await _run(runtime, AgentSpec(on_limit="answer"), Budget(max_llm_calls=3))

    _incomplete(events, chain, "max_llm_calls")
    assert chain.metrics.llm_calls == 3
    assert "tools" not in fake_llm.requests[-1].body
    assert "only one more model call" in fake_llm.requests[-1].body["messages"][-1]["content"]


async def test_under_a_cost_budget_the_final_call_is_kept_back_and_capped_to_fit(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """Each ordinary call may cost about $0.011 at worst and costs $0.009125; the final call
    is kept back at its prompt plus 1,000 tokens in and 256 out (about $0.0055). After two
    calls ($0.01825 spent) a third and the final one would not fit in $0.027: the final call
    is made now, with its output capped to what remains (about 830 tokens, not 1,000)."""
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, WORK, FINAL)
    budget = Decimal("0.027")
    spec = AgentSpec(on_limit="answer", max_output_tokens=MAX_OUTPUT)

    events, chain = await _run(runtime, spec, Budget(max_cost_usd=budget))

    _incomplete(events, chain, "max_cost_usd")
    assert len(fake_llm.requests) == 3
    assert "tools" not in fake_llm.requests[-1].body
    assert "cost budget" in fake_llm.requests[-1].body["messages"][-1]["content"]
    spent = chain.metrics.total_cost_usd
    assert (
        spent
        == _cost(chain)
        == 2 * (50 * IN_PRICE + 900 * OUT_PRICE) + (60 * IN_PRICE + 100 * OUT_PRICE)
    )
    assert spent <= budget
    # The final call asked for the most output whose worst case fits what was left.
    final_step = _llm_steps(chain)[-1]
    capped = fake_llm.requests[-1].body["max_tokens"]
    assert FINAL_MIN_TOKENS <= capped < MAX_OUTPUT
    assert final_step.tool_call.arguments["max_tokens"] == capped
    before_final = 2 * (50 * IN_PRICE + 900 * OUT_PRICE)
    messages = chain.llm_messages(final_step)

    async def worst(max_tokens: int) -> Decimal:
        request = LLMRequest(model=MODEL, messages=messages, max_tokens=max_tokens)
        cost = (await runtime.gateway.estimate(request)).cost_usd
        assert cost is not None
        return cost

    assert before_final + await worst(capped) <= budget < before_final + await worst(capped + 1)


async def test_under_the_same_cost_budget_on_limit_fail_is_refused_by_the_guard(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, WORK)
    budget = Decimal("0.027")

    events, chain = await _run(
        runtime, AgentSpec(max_output_tokens=MAX_OUTPUT), Budget(max_cost_usd=budget)
    )

    failed = events[-2]
    assert isinstance(failed, ChainFailedEvent)
    assert failed.error_code is ErrorCode.BUDGET_EXCEEDED
    assert failed.details["limit"] == "max_cost_usd"
    assert len(fake_llm.requests) == 2
    assert chain.metrics.total_cost_usd <= budget
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].final_state is TaskState.FAILED


async def test_under_a_token_budget_the_final_call_fits_the_tokens_left(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, WORK, WORK, FINAL)
    limit = 4000

    events, chain = await _run(
        runtime,
        AgentSpec(on_limit="answer", max_output_tokens=MAX_OUTPUT),
        Budget(max_tokens=limit),
    )

    _incomplete(events, chain, "max_tokens")
    assert len(fake_llm.requests) == 3
    assert chain.metrics.total_tokens == 2 * 950 + 160 <= limit
    final_step = _llm_steps(chain)[-1]
    estimate = await runtime.gateway.estimate(
        LLMRequest(
            model=MODEL,
            messages=chain.llm_messages(final_step),
            max_tokens=fake_llm.requests[-1].body["max_tokens"],
        )
    )
    assert 2 * 950 + estimate.input_tokens + estimate.max_output_tokens <= limit


async def test_a_budget_too_small_for_any_work_gets_the_final_call_first(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    runtime = _runtime(fake_llm, tmp_path)
    fake_llm.script(MODEL, FINAL)

    events, chain = await _run(
        runtime,
        AgentSpec(on_limit="answer", max_output_tokens=MAX_OUTPUT),
        Budget(max_cost_usd=Decimal("0.012")),
    )

    _incomplete(events, chain, "max_cost_usd")
    [request] = fake_llm.requests
    assert "tools" not in request.body
    assert [s.type for s in chain.steps] == [
        StepType.TOOL_CALL,
        StepType.TOOL_RESULT,
        StepType.SYNTHESIS,
    ]
    assert json.dumps(request.body["messages"][-1]).count("cost budget") == 1
    assert chain.metrics.total_cost_usd <= Decimal("0.012")
