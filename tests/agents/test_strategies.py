"""The built-in strategies over the fake provider: `direct` and `cot` make one call, `tot`
searches a tree of the model's thoughts with the model's scores, and `auto` chooses among them
by the task's complexity and what the budget can pay, falling back to simpler ones."""

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentSpec, AgentTask
from app.agents.runtime import RuntimeSettings
from app.agents.spec import (
    AutoOptions,
    ComplexityBand,
    MonteCarloOptions,
    StrategyOptions,
    TreeSearchOptions,
)
from app.agents.strategies.auto import heuristic
from app.chain import (
    Budget,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    StrategyEvent,
    ThinkingInfo,
)
from app.config import Settings
from app.governance.budgets import BudgetGuard
from app.tools.builtin import CalculatorTool, CurrentTimeTool
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply, ToolCall

MODEL = "strategy-model"
ORDER = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


@pytest.fixture
def runtime(fake_llm: FakeLLMServer, tmp_path: Path) -> AgentRuntime:
    deployment = fake_deployment(
        fake_llm, MODEL, input_cost="0.000001", output_cost="0.000002", native_tools=True
    )
    return runtime_for(tmp_path, [deployment], default_model=MODEL, llm_initial_backoff_s=0.01)


async def _run(
    runtime: AgentRuntime, spec: AgentSpec, text: str, budget: Budget | None = None
) -> tuple[list[ChainEvent], ReasoningChain]:
    task = AgentTask(input=text)
    chain = ReasoningChain(task_id=task.id, agent_id=spec.kind, budget=budget)
    guards = [BudgetGuard(chain)] if budget is not None else []
    run = runtime.agent_for(spec).start(task, chain=chain, guards=guards)
    events = [event async for event in run.events()]
    return events, run.chain


def _answer(events: list[ChainEvent]) -> str | None:
    [completed] = [e for e in events if isinstance(e, ChainCompletedEvent)]
    return completed.answer


def _records(chain: ReasoningChain, event: StrategyEvent) -> list[ReasoningStep]:
    return [s for s in chain.steps if s.thinking is not None and s.thinking.event is event]


def _info(step: ReasoningStep) -> ThinkingInfo:
    assert step.thinking is not None
    return step.thinking


def _detail(step: ReasoningStep) -> dict[str, Any]:
    detail = _info(step).detail
    assert detail is not None
    return detail


def _system(request: RecordedRequest) -> str:
    content: str = request.body["messages"][0]["content"]
    return content


def _last_user(request: RecordedRequest) -> str:
    content: str = request.body["messages"][-1]["content"]
    return content


async def test_direct_answers_in_one_call_without_tools(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script(MODEL, Reply.text("Paris."))
    events, chain = await _run(runtime, AgentSpec(kind="direct"), "Capital of France?")
    [request] = fake_llm.requests_for(MODEL)
    assert "tools" not in request.body
    assert "directly" in _system(request)
    assert _last_user(request) == "Capital of France?"
    assert _answer(events) == "Paris."
    assert [s.type.value for s in chain.steps] == ["tool_call", "tool_result", "synthesis"]
    fake_llm.verify()


async def test_cot_records_its_reasoning_as_a_thought_before_the_answer(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    reply = "3+4 is 7.\n12 times 7 is 84.\nConfidence: 0.9\nAnswer: 84"
    fake_llm.script(MODEL, Reply.text(reply))
    events, chain = await _run(runtime, AgentSpec(kind="cot"), "What is 12*(3+4)?")
    [request] = fake_llm.requests_for(MODEL)
    assert "step by step" in _system(request)
    assert _answer(events) == "84"
    _call, result, thought, synthesis = chain.steps
    assert _info(thought).thought == "3+4 is 7.\n12 times 7 is 84."
    assert _info(thought).confidence == 0.9
    assert thought.parent_step_id == result.id
    assert synthesis.synthesis is not None
    assert synthesis.synthesis.sources == [thought.id, result.id]
    fake_llm.verify()


async def test_cot_fails_an_answer_that_misses_the_response_format(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script(MODEL, Reply.text("Adding up.\nAnswer: about forty"))
    spec = AgentSpec(kind="cot", response_format=ORDER)
    events, _chain = await _run(runtime, spec, "Total of 12 and 30?")
    [failed] = [e for e in events if isinstance(e, ChainFailedEvent)]
    assert failed.error_code is ErrorCode.INVALID_OUTPUT
    assert "response_format" in failed.error_message
    [request] = fake_llm.requests_for(MODEL)
    assert json.dumps(ORDER) in _system(request)
    fake_llm.verify()


PROPOSE, RATE = "propose 2 different", "rate how likely"
LEAVES = {"then A1": 0.5, "then A2": 0.6, "then B1": 0.2, "then B2": 0.95}


def _score(value: float) -> Reply:
    return Reply.text(json.dumps({"score": value, "reason": f"scored {value}"}))


def _proposals(*thoughts: str) -> Reply:
    return Reply.text(json.dumps({"thoughts": list(thoughts)}))


def _script_tree(fake_llm: FakeLLMServer) -> None:
    """Breadth 2, depth 2, beam 2: the root's proposals A and B, scored 0.9 and 0.4; A's
    children A1 (0.5) and A2 (0.6), B's B1 (0.2) and B2 (0.95): the best path is B → B2."""
    fake_llm.script_matching(MODEL, (PROPOSE, "(none yet)"), _proposals("use A", "use B"))
    fake_llm.script_matching(MODEL, (PROPOSE, "1. use A"), _proposals("then A1", "then A2"))
    fake_llm.script_matching(MODEL, (PROPOSE, "1. use B"), _proposals("then B1", "then B2"))
    # Each level's scores are asked for after the level before's are in: a first-level
    # matcher is used up before the second level's requests (which hold its text too) arrive.
    for thought, value in {"use A": 0.9, "use B": 0.4}.items():
        fake_llm.script_matching(MODEL, (RATE, f"1. {thought}"), _score(value))
    _script_leaves(fake_llm, LEAVES)


def _script_leaves(fake_llm: FakeLLMServer, leaves: dict[str, float]) -> None:
    for thought, value in leaves.items():
        fake_llm.script_matching(MODEL, (RATE, f"2. {thought}"), _score(value))
    fake_llm.script_matching(MODEL, ("final answer to the task",), Reply.text("B2 it is"))


async def test_tot_searches_a_beam_and_answers_from_the_best_path(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    _script_tree(fake_llm)
    options = StrategyOptions(tot=TreeSearchOptions(breadth=2, depth=2, beam=2))
    events, chain = await _run(runtime, AgentSpec(kind="tot", strategy=options), "Solve it.")
    assert _answer(events) == "B2 it is"
    # Per level: one proposal call per kept node, one scoring call per proposal; then the
    # answer. Level 1: 1 + 2; level 2: 2 + 4.
    kinds = []
    for request in fake_llm.requests_for(MODEL):
        system = _system(request)
        kinds.append("propose" if "propose" in system else "rate" if "rate" in system else "answer")
    assert kinds == ["propose", "rate", "rate", "propose", "propose", *["rate"] * 4, "answer"]
    thoughts = {_info(s).thought: s for s in _records(chain, StrategyEvent.THOUGHT)}
    assert set(thoughts) == {"use A", "use B", "then A1", "then A2", "then B1", "then B2"}
    assert thoughts["use A"].parent_step_id is None
    assert thoughts["then B2"].parent_step_id == thoughts["use B"].id
    assert thoughts["then A1"].parent_step_id == thoughts["use A"].id
    scored = {
        s.parent_step_id: _info(s).confidence for s in _records(chain, StrategyEvent.THOUGHT_SCORED)
    }
    assert scored == {
        thoughts["use A"].id: 0.9,
        thoughts["use B"].id: 0.4,
        thoughts["then A1"].id: 0.5,
        thoughts["then A2"].id: 0.6,
        thoughts["then B1"].id: 0.2,
        thoughts["then B2"].id: 0.95,
    }
    [chosen] = _records(chain, StrategyEvent.PATH_CHOSEN)
    assert _detail(chosen)["path"] == [
        str(thoughts["use B"].id),
        str(thoughts["then B2"].id),
    ]
    answer_request = fake_llm.requests_for(MODEL)[-1]
    assert "1. use B\n2. then B2" in _last_user(answer_request)
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.sources[:2] == [thoughts["use B"].id, thoughts["then B2"].id]
    fake_llm.verify()


def _auto(**options: Any) -> AgentSpec:
    table = (
        ComplexityBand(below=0.3, strategy="direct"),
        ComplexityBand(below=0.6, strategy="cot"),
        ComplexityBand(below=1.0, strategy="tot"),
    )
    auto = AutoOptions(table=table, **options)
    tot = TreeSearchOptions(breadth=1, depth=1, beam=1)
    return AgentSpec(kind="auto", strategy=StrategyOptions(auto=auto, tot=tot))


def _assessed(complexity: float) -> Reply:
    return Reply.text(json.dumps({"complexity": complexity, "reason": "as scripted"}))


@pytest.mark.parametrize(
    ("complexity", "strategy", "calls"),
    [(0.1, "direct", 1), (0.45, "cot", 1), (0.9, "tot", 3)],
)
async def test_auto_runs_the_strategy_its_table_maps_the_complexity_to(
    runtime: AgentRuntime,
    fake_llm: FakeLLMServer,
    complexity: float,
    strategy: str,
    calls: int,
) -> None:
    fake_llm.script_matching(MODEL, ("Rate how complex",), _assessed(complexity))
    if strategy == "direct":
        fake_llm.script_matching(MODEL, ("directly",), Reply.text("done"))
    elif strategy == "cot":
        fake_llm.script_matching(MODEL, ("step by step",), Reply.text("So.\nAnswer: done"))
    else:
        fake_llm.script_matching(MODEL, ("propose 1 different",), Reply.text('{"thoughts": ["t"]}'))
        fake_llm.script_matching(MODEL, ("rate how likely",), Reply.text('{"score": 0.8}'))
        fake_llm.script_matching(MODEL, ("final answer to the task",), Reply.text("done"))
    events, chain = await _run(runtime, _auto(), "Some task.")
    assert _answer(events) == "done"
    assert len(fake_llm.requests_for(MODEL)) == 1 + calls
    [assessed] = _records(chain, StrategyEvent.COMPLEXITY_ASSESSED)
    assert _detail(assessed) == {
        "complexity": complexity,
        "method": "model",
    }
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert _detail(selected)["strategy"] == strategy
    assert not _records(chain, StrategyEvent.STRATEGY_FALLBACK)
    fake_llm.verify()


async def test_auto_falls_back_when_an_answer_misses_the_contract(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(MODEL, ("Rate how complex",), _assessed(0.5))
    fake_llm.script_matching(MODEL, ("step by step",), Reply.text("Hm.\nAnswer: forty-two"))
    fake_llm.script_matching(MODEL, ("directly",), Reply.text('{"total": 42}'))
    spec = _auto().model_copy(update={"response_format": ORDER})
    events, chain = await _run(runtime, spec, "Total of 12 and 30?")
    assert _answer(events) == '{"total": 42}'
    [fallback] = _records(chain, StrategyEvent.STRATEGY_FALLBACK)
    detail = _detail(fallback)
    assert (detail["from"], detail["to"], detail["error_code"]) == (
        "cot",
        "direct",
        "invalid_output",
    )
    assert "response_format" in detail["reason"]
    synthesis = chain.steps[-1].synthesis
    assert synthesis is not None
    assert synthesis.output == {"total": 42}
    fake_llm.verify()


async def test_auto_falls_back_from_an_answer_under_its_min_confidence(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(MODEL, ("Rate how complex",), _assessed(0.5))
    fake_llm.script_matching(MODEL, ("step by step",), Reply.text("Confidence: 0.2\nAnswer: 7?"))
    fake_llm.script_matching(MODEL, ("directly",), Reply.text("7"))
    base = _auto()
    assert base.strategy is not None
    spec = base.model_copy(
        update={"strategy": base.strategy.model_copy(update={"min_confidence": 0.5})}
    )
    events, chain = await _run(runtime, spec, "3+4?")
    assert _answer(events) == "7"
    [fallback] = _records(chain, StrategyEvent.STRATEGY_FALLBACK)
    assert "under the agent's min_confidence" in _info(fallback).thought
    fake_llm.verify()


async def test_auto_leaves_out_what_the_budget_cannot_pay_for(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """Of 3 LLM calls allowed the assessment takes one: tot (propose, score, answer: 3)
    cannot be paid, so the high score runs the next simpler strategy, ReAct (2 at least)."""
    fake_llm.script_matching(MODEL, ("Rate how complex",), _assessed(0.9))
    fake_llm.script(MODEL, Reply.text("cheap"))
    events, chain = await _run(runtime, _auto(), "Hard task.", Budget(max_llm_calls=3))
    assert _answer(events) == "cheap"
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert _detail(selected)["table"] == "tot"
    assert _detail(selected)["excluded"] == ["tot"]
    assert _detail(selected)["strategy"] == "react"
    assert len(fake_llm.requests_for(MODEL)) == 2
    fake_llm.verify()


async def test_auto_scores_by_heuristic_when_its_assessing_call_fails(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(MODEL, ("Rate how complex",), Reply.error(400, "bad"))
    fake_llm.script(MODEL, Reply.text("hi"))
    events, chain = await _run(runtime, _auto(), "Say hi.")
    assert _answer(events) == "hi"
    [assessed] = _records(chain, StrategyEvent.COMPLEXITY_ASSESSED)
    assert _detail(assessed)["method"] == "heuristic"
    assert "assessing call failed" in _info(assessed).thought
    fake_llm.verify()


def test_the_heuristic_scores_longer_multi_step_tool_work_higher() -> None:
    short = heuristic(AgentTask(input="Say hi."), "test").complexity
    reasoning = heuristic(
        AgentTask(input="Explain why the sky is blue, then compare it with sunsets. Why red?"),
        "test",
    ).complexity
    tools = heuristic(
        AgentTask(
            input="First fetch https://example.com/report, then calculate the totals per "
            "region, compare them with last year's, and design a plan with steps. " * 3
        ),
        "test",
    ).complexity
    assert short < 0.3 <= reasoning < 0.6 <= tools <= 1.0


@pytest.fixture(scope="module")
def demo_runtime() -> AgentRuntime:
    """A fresh install's runtime: the offline demo model, the calculator and the clock."""
    tools = [CalculatorTool(), CurrentTimeTool()]
    return AgentRuntime.build(RuntimeSettings.model_validate(Settings()), tools=tools)


async def test_the_demo_model_speaks_every_strategy(demo_runtime: AgentRuntime) -> None:
    """On a fresh install, `auto` rates arithmetic as needing tools and runs ReAct, which
    has the calculator; the tool-less strategies complete and say what the task needs."""
    events, chain = await _run(demo_runtime, AgentSpec(kind="auto"), "What is 12*(3+4)?")
    assert _answer(events) == "12 * (3 + 4) = 84."
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert _detail(selected)["strategy"] == "react"
    events, chain = await _run(demo_runtime, AgentSpec(kind="auto"), "Say hello.")
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert _detail(selected)["strategy"] == "direct"
    assert "demo model" in (_answer(events) or "")
    for kind in ("cot", "tot"):
        events, chain = await _run(demo_runtime, AgentSpec(kind=kind), "What is 12*(3+4)?")
        assert "needs the calculator tool" in (_answer(events) or ""), kind
    chosen = _records(chain, StrategyEvent.PATH_CHOSEN)[0]
    assert "calculator" in _info(chosen).thought
    # A search over ReAct steps may call the calculator, and answers from its result.
    events, chain = await _run(demo_runtime, AgentSpec(kind="mcts"), "What is 12*(3+4)?")
    assert _answer(events) == "12 * (3 + 4) = 84."
    # A plan's tool step calls the calculator; the answer is written from its result.
    events, chain = await _run(demo_runtime, AgentSpec(kind="plan"), "What is 12*(3+4)?")
    assert _answer(events) == "12 * (3 + 4) = 84."
    assert [s.tool_call.tool_name for s in chain.steps if s.tool_call] == [
        "llm",
        "calculator",
        "llm",
    ]
    spec = AgentSpec(kind="cot", response_format=ORDER)
    events, _chain = await _run(demo_runtime, spec, "What is 12*(3+4)?")
    [completed] = [e for e in events if isinstance(e, ChainCompletedEvent)]
    assert set(completed.output) == {"total"}  # JSON shaped by the schema, as it was asked


@pytest.mark.parametrize("stored_scores", [0, 2])
async def test_a_resumed_tree_search_repeats_no_stored_call(
    runtime: AgentRuntime, fake_llm: FakeLLMServer, stored_scores: int
) -> None:
    """A run stopped after its second level's proposals (and `stored_scores` of that level's
    scores) resumes from its stored steps: the same tree, the same answer, and only the calls
    whose results were not stored are made again."""
    _script_tree(fake_llm)
    options = StrategyOptions(tot=TreeSearchOptions(breadth=2, depth=2, beam=2))
    spec = AgentSpec(kind="tot", strategy=options)
    task = AgentTask(input="Solve it.")
    first = runtime.agent_for(spec).start(task)
    [event async for event in first.events()]
    steps = first.chain.steps
    scored = [
        s
        for s in steps
        if s.thinking is not None and s.thinking.event is StrategyEvent.THOUGHT_SCORED
    ]
    level_two = [s for s in steps if s.tool_result is not None][5:9]  # its four score results
    assert len(scored) == 6
    assert len(level_two) == 4
    cut = steps.index(level_two[0]) + stored_scores
    fake_llm.reset()
    # The second level's scores whose results were not stored (the batch's first ones were).
    _script_leaves(fake_llm, dict(list(LEAVES.items())[stored_scores:]))
    chain = ReasoningChain(task_id=task.id, agent_id="tot", id=first.chain.id)
    chain.replay([s.model_copy(deep=True) for s in steps[:cut]])
    resumed = runtime.agent_for(spec).start(task, chain=chain)
    events = [event async for event in resumed.events()]
    assert _answer(events) == "B2 it is"
    assert [s.id for s in resumed.chain.steps[:cut]] == [s.id for s in steps[:cut]]
    assert [_info(s).thought for s in resumed.chain.steps if s.thinking is not None] == [
        _info(s).thought for s in steps if s.thinking is not None
    ]
    made = ["rate" if "rate how" in _system(r) else "answer" for r in fake_llm.requests_for(MODEL)]
    assert made == ["rate"] * (4 - stored_scores) + ["answer"]


async def test_mcts_simulates_expands_rolls_out_and_scores(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """Three simulations, breadth 2: the root is expanded twice (a calculator call, then a
    wrong answer, told the first was tried), then UCB1 picks the better-scored calculator node
    and expands it to an answer. Each new node that did not answer is rolled out; every
    answer is scored; the best-scored answer and its path are the run's."""
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "12*7"})]),
        Reply.text("84"),  # the calculator node's rollout
        Reply.text('{"score": 0.6, "reason": "checked by the tool"}'),
        Reply.text("Answer: 80"),
        Reply.text('{"score": 0.2, "reason": "a guess"}'),
        Reply.text("It is 84.\nAnswer: 84"),
        Reply.text('{"score": 0.9, "reason": "right"}'),
    )
    options = StrategyOptions(mcts=MonteCarloOptions(simulations=3, breadth=2, max_depth=2))
    events, chain = await _run(runtime, AgentSpec(kind="mcts", strategy=options), "12*(3+4)?")
    assert _answer(events) == "84"
    requests = fake_llm.requests_for(MODEL)
    shape = []
    for request in requests:
        system = _system(request)
        shape.append(
            "judge"
            if "You judge answers" in system
            else "rollout"
            if "without tools" in _last_user(request)
            else "expand"
        )
    assert shape == ["expand", "rollout", "judge", "expand", "judge", "expand", "judge"]
    offered = {tool["function"]["name"] for tool in requests[0].body["tools"]}
    idempotent = {
        d.name for d in runtime.registry.list_tools() if d.idempotent and d.type.value != "llm"
    }
    assert offered == idempotent
    assert "calculator" in offered
    assert "Steps already tried from here" in _last_user(requests[3])
    assert 'calculator {"expression": "12*7"}' in _last_user(requests[3])
    assert [m["role"] for m in requests[5].body["messages"][-2:]] == ["assistant", "tool"]
    nodes = _records(chain, StrategyEvent.THOUGHT)
    assert [_info(n).thought for n in nodes] == [
        'calculator {"expression": "12*7"}',
        "answer: 80",
        "It is 84. → answer: 84",
    ]
    assert [n.parent_step_id for n in nodes] == [None, None, nodes[0].id]
    scores = _records(chain, StrategyEvent.THOUGHT_SCORED)
    assert [(s.parent_step_id, _detail(s)["score"], _detail(s)["answer"]) for s in scores] == [
        (nodes[0].id, 0.6, "84"),
        (nodes[1].id, 0.2, "80"),
        (nodes[2].id, 0.9, "84"),
    ]
    [chosen] = _records(chain, StrategyEvent.PATH_CHOSEN)
    assert _detail(chosen)["path"] == [str(nodes[0].id), str(nodes[2].id)]
    assert _info(chosen).confidence == 0.9
    fake_llm.verify()


async def test_a_tree_search_near_its_limit_answers_from_its_best_path_within_budget(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """Six LLM calls allowed: the first level (a proposal, two scores) fits with the answer
    kept back, the second (two proposals, four scores) does not; with `on_limit: answer` the
    search stops there and answers from the best path so far, told why, `incomplete`."""
    fake_llm.script_matching(MODEL, (PROPOSE, "(none yet)"), _proposals("use A", "use B"))
    for thought, value in {"use A": 0.9, "use B": 0.4}.items():
        fake_llm.script_matching(MODEL, (RATE, f"1. {thought}"), _score(value))
    fake_llm.script_matching(MODEL, ("final answer to the task",), Reply.text("A it is"))
    options = StrategyOptions(tot=TreeSearchOptions(breadth=2, depth=2, beam=2))
    spec = AgentSpec(kind="tot", strategy=options, on_limit="answer")
    events, chain = await _run(runtime, spec, "Solve it.", Budget(max_llm_calls=6))
    [completed] = [e for e in events if isinstance(e, ChainCompletedEvent)]
    assert (completed.answer, completed.stop_reason) == ("A it is", "max_llm_calls")
    requests = fake_llm.requests_for(MODEL)
    assert len(requests) == 4
    assert "only one more model call" in _last_user(requests[-1])
    assert "1. use A" in json.dumps(requests[-1].body["messages"])
    [chosen] = _records(chain, StrategyEvent.PATH_CHOSEN)
    assert _info(chosen).thought.endswith("use A")
    fake_llm.verify()


async def test_a_monte_carlo_search_near_its_limit_answers_with_its_best_so_far(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """Four LLM calls allowed: one simulation (a step, its rollout, its score) fits with an
    answer kept back, a second does not; the search ends with the answer it has scored, no
    call more, `incomplete`."""
    fake_llm.script(
        MODEL,
        Reply.text("First, 3+4 is 7."),
        Reply.text("84"),
        Reply.text('{"score": 0.7, "reason": "plausible"}'),
    )
    options = StrategyOptions(mcts=MonteCarloOptions(simulations=3, breadth=2, max_depth=2))
    spec = AgentSpec(kind="mcts", strategy=options, on_limit="answer")
    events, chain = await _run(runtime, spec, "12*(3+4)?", Budget(max_llm_calls=4))
    [completed] = [e for e in events if isinstance(e, ChainCompletedEvent)]
    assert (completed.answer, completed.stop_reason) == ("84", "max_llm_calls")
    assert len(fake_llm.requests_for(MODEL)) == 3
    assert chain.usage().llm_calls == 3
    fake_llm.verify()


async def test_auto_steps_down_to_the_fallback_model_the_budget_can_pay_for(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """A call on the agent's model would cost more than the whole budget (its output cap at
    its price), one on its fallback model far less: the task is scored without a call, runs
    `direct` on the fallback model, and is never over the budget."""
    big = fake_deployment(fake_llm, "big", input_cost="0.001", output_cost="0.001")
    small = fake_deployment(fake_llm, "small", input_cost="0.0000001", output_cost="0.0000001")
    runtime = runtime_for(tmp_path, [big, small], default_model="big")
    fake_llm.script("small", Reply.text("cheap answer"))
    spec = AgentSpec(kind="auto", model="big", fallback_model="small", max_output_tokens=1000)
    events, chain = await _run(runtime, spec, "Say hi.", Budget(max_cost_usd=Decimal("0.5")))
    assert _answer(events) == "cheap answer"
    assert fake_llm.requests_for("big") == []
    [assessed] = _records(chain, StrategyEvent.COMPLEXITY_ASSESSED)
    assert _detail(assessed)["method"] == "heuristic"
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert (_detail(selected)["strategy"], _detail(selected)["model"]) == ("direct", "small")
    assert _detail(selected)["excluded"] == []
    assert chain.usage().cost_usd <= Decimal("0.5")
    fake_llm.verify()


async def test_auto_leaves_out_mcts_when_the_budget_cannot_pay_for_its_simulations(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """The table maps a high score to mcts (6 simulations: 18 calls); with 5 LLM calls
    allowed and one spent on the assessment, the run takes the next strategy it can pay for,
    a one-level tree (a proposal, its score, the answer)."""
    table = (
        ComplexityBand(below=0.3, strategy="direct"),
        ComplexityBand(below=0.6, strategy="cot"),
        ComplexityBand(below=1.0, strategy="mcts"),
    )
    tot = TreeSearchOptions(breadth=1, depth=1, beam=1)
    options = StrategyOptions(auto=AutoOptions(table=table), tot=tot)
    fake_llm.script_matching(MODEL, ("Rate how complex",), _assessed(0.95))
    fake_llm.script_matching(MODEL, ("propose 1 different",), Reply.text('{"thoughts": ["t"]}'))
    fake_llm.script_matching(MODEL, ("rate how likely",), Reply.text('{"score": 0.8}'))
    fake_llm.script_matching(MODEL, ("final answer to the task",), Reply.text("from the tree"))
    spec = AgentSpec(kind="auto", strategy=options)
    events, chain = await _run(runtime, spec, "Hard task.", Budget(max_llm_calls=5))
    assert _answer(events) == "from the tree"
    [selected] = _records(chain, StrategyEvent.STRATEGY_SELECTED)
    assert (_detail(selected)["table"], _detail(selected)["strategy"]) == ("mcts", "tot")
    assert _detail(selected)["excluded"] == ["mcts"]
    assert chain.usage().llm_calls == 4
    fake_llm.verify()
