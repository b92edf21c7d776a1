"""`plan` over the fake provider: the model's plan is checked (and asked for again once), run
in waves whose steps are made concurrently, each reasoning step capped to its carved share of
the budget, a step that fails twice or overruns has the plan revised, and a resumed run makes
no finished step's call again."""

import json
from pathlib import Path
from typing import Any

import pytest

from app.agents import AgentRuntime, AgentSpec, AgentTask
from app.agents.spec import AutoOptions, ComplexityBand, PlanOptions, StrategyOptions
from app.chain import (
    Budget,
    ChainCompletedEvent,
    ChainEvent,
    ReasoningChain,
    StrategyEvent,
    ThinkingInfo,
)
from app.governance.budgets import BudgetGuard
from tests.factories import fake_deployment, runtime_for
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

MODEL = "plan-model"
PLANNING = "Plan how to do the task"
SYNTHESIS = "from the results of the plan's steps"
DELAY_S = 0.3  # the model's latency for a step: a wave's calls overlap within it


@pytest.fixture
def runtime(fake_llm: FakeLLMServer, tmp_path: Path) -> AgentRuntime:
    deployment = fake_deployment(
        fake_llm, MODEL, input_cost="0.000001", output_cost="0.000002", native_tools=True
    )
    return runtime_for(tmp_path, [deployment], default_model=MODEL, llm_initial_backoff_s=0.01)


def _plan(*steps: dict[str, Any]) -> Reply:
    return Reply.text(json.dumps({"steps": list(steps)}))


def _step(step_id: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": step_id,
        "description": f"do {step_id}",
        "type": "reasoning",
        "strategy": "direct",
        "depends_on": list(depends_on),
        **fields,
    }


async def _run(
    runtime: AgentRuntime,
    text: str,
    *,
    budget: Budget | None = None,
    chain: ReasoningChain | None = None,
    **options: Any,
) -> tuple[list[ChainEvent], ReasoningChain]:
    spec = AgentSpec(kind="plan", strategy=StrategyOptions(plan=PlanOptions(**options)))
    task = AgentTask(id="plan-task", input=text)
    chain = chain or ReasoningChain(task_id=task.id, agent_id="plan", budget=budget)
    guards = [BudgetGuard(chain)] if chain.budget is not None else []
    run = runtime.agent_for(spec).start(task, chain=chain, guards=guards)
    events = [event async for event in run.events()]
    return events, run.chain


def _completed(events: list[ChainEvent]) -> ChainCompletedEvent:
    [completed] = [e for e in events if isinstance(e, ChainCompletedEvent)]
    return completed


def _records(chain: ReasoningChain, event: StrategyEvent) -> list[ThinkingInfo]:
    return [s.thinking for s in chain.steps if s.thinking is not None and s.thinking.event is event]


def _step_requests(fake_llm: FakeLLMServer) -> dict[str, RecordedRequest]:
    """Each step's request, by the step id its text names."""
    found = {}
    for request in fake_llm.requests_for(MODEL):
        text = request.body["messages"][-1]["content"]
        if "This step: do " in text:
            found[text.split("This step: do ")[1].split("\n")[0]] = request
    return found


async def test_independent_branches_run_in_parallel_waves_within_their_carved_budgets(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """Two branches of three steps: each wave holds one step of each, made at once (the
    second request arrives before the first is answered); a step starts only after what it
    depends on, and is told its results; each reasoning step is capped to its share of the
    tokens left, and the whole plan stays within the budget."""
    fake_llm.script_matching(
        MODEL,
        (PLANNING,),
        _plan(
            _step("a1"),
            _step("b1"),
            _step("a2", "a1"),
            _step("b2", "b1"),
            _step("a3", "a2"),
            _step("b3", "b2"),
        ),
    )
    for step in ("a1", "a2", "a3", "b1", "b2", "b3"):
        fake_llm.script_matching(
            MODEL, (f"This step: do {step}",), Reply.text(f"out-{step}", delay_s=DELAY_S)
        )
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("all done"))
    budget = Budget(max_tokens=20_000)
    events, chain = await _run(runtime, "Do both branches.", budget=budget)
    assert _completed(events).answer == "all done"
    requests = _step_requests(fake_llm)
    for first, second in (("a1", "b1"), ("a2", "b2"), ("a3", "b3")):
        apart = abs(requests[first].received_at - requests[second].received_at)
        assert apart < DELAY_S, (first, second, apart)
    for step, dependency in (("a2", "a1"), ("a3", "a2"), ("b2", "b1"), ("b3", "b2")):
        assert requests[step].received_at >= requests[dependency].received_at + DELAY_S
        assert f"[{dependency}] out-{dependency}" in requests[step].body["messages"][-1]["content"]
    started = _records(chain, StrategyEvent.PLAN_STEP_STARTED)
    assert [info.detail["step"] for info in started if info.detail] == [
        "a1",
        "b1",
        "a2",
        "b2",
        "a3",
        "b3",
    ]
    for index, info in enumerate(started):
        assert info.detail is not None
        cap = info.detail["max_tokens"]
        assert requests[info.detail["step"]].body["max_tokens"] == cap
        if index < 2:  # the first wave: a seventh each (six steps and the answer)
            assert cap <= 20_000 // 7
    assert chain.usage().tokens <= 20_000
    [created] = _records(chain, StrategyEvent.PLAN_CREATED)
    assert created.detail is not None
    assert [s["id"] for s in created.detail["steps"]] == ["a1", "b1", "a2", "b2", "a3", "b3"]
    assert len(_records(chain, StrategyEvent.PLAN_STEP_COMPLETED)) == 6
    assert len(_records(chain, StrategyEvent.PLAN_COMPLETED)) == 1
    fake_llm.verify()


async def test_a_plan_that_cannot_run_is_asked_for_again_with_what_is_wrong(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(
        MODEL,
        (PLANNING,),
        _plan(_step("x", "y"), _step("y", "x"), _step("z", type="tool", tool="no_such_tool")),
        _plan(_step("x")),
    )
    fake_llm.script_matching(MODEL, ("This step: do x",), Reply.text("out-x"))
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("fine"))
    events, _chain = await _run(runtime, "Anything.")
    assert _completed(events).answer == "fine"
    again = [
        r for r in fake_llm.requests_for(MODEL) if PLANNING in r.body["messages"][0]["content"]
    ]
    assert len(again) == 2
    told = again[1].body["messages"][-1]["content"]
    assert "cycle" in told
    assert "no_such_tool" in told
    fake_llm.verify()


async def test_a_step_failing_twice_has_the_plan_revised_and_the_revision_completes(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    """`count` must give JSON with a number; it answers prose twice (its contract missed,
    tried once more), so the model revises the rest of the plan, told what failed; the
    revised step may build on the finished one."""
    schema = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    fake_llm.script_matching(
        MODEL, (PLANNING,), _plan(_step("gather"), _step("count", "gather", output_schema=schema))
    )
    fake_llm.script_matching(MODEL, ("This step: do gather",), Reply.text("three apples"))
    fake_llm.script_matching(
        MODEL, ("This step: do count",), Reply.text("three"), Reply.text("still three")
    )
    fake_llm.script_matching(
        MODEL,
        ("A step of the plan failed",),
        _plan(_step("recount", "gather", output_schema=schema)),
    )
    fake_llm.script_matching(MODEL, ("This step: do recount",), Reply.text('{"n": 3}'))
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("3 apples"))
    events, chain = await _run(runtime, "How many apples?")
    assert _completed(events).answer == "3 apples"
    failed = _records(chain, StrategyEvent.PLAN_STEP_FAILED)
    assert [(i.detail["step"], i.detail["attempt"]) for i in failed if i.detail] == [
        ("count", 1),
        ("count", 2),
    ]
    assert all("contract" in info.thought for info in failed)
    [revised] = _records(chain, StrategyEvent.PLAN_REVISED)
    assert revised.detail is not None
    assert [s["id"] for s in revised.detail["steps"]] == ["recount"]
    revision_request = next(
        r for r in fake_llm.requests_for(MODEL) if "A step of the plan failed" in json.dumps(r.body)
    )
    told = revision_request.body["messages"][-1]["content"]
    assert "gather: three apples" in told
    assert "count" in told
    assert (
        "[gather] three apples"
        in _step_requests(fake_llm)["recount"].body["messages"][-1]["content"]
    )
    fake_llm.verify()


async def test_a_step_that_overruns_its_carved_budget_is_stopped_and_replanned(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(MODEL, (PLANNING,), _plan(_step("essay")))
    fake_llm.script_matching(
        MODEL, ("This step: do essay",), Reply.text("It was a dark", finish_reason="length")
    )
    fake_llm.script_matching(MODEL, ("A step of the plan failed",), _plan(_step("summary")))
    fake_llm.script_matching(MODEL, ("This step: do summary",), Reply.text("Short."))
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("Short."))
    events, chain = await _run(runtime, "Write.", budget=Budget(max_tokens=5_000))
    assert _completed(events).answer == "Short."
    [failed] = _records(chain, StrategyEvent.PLAN_STEP_FAILED)
    assert failed.detail is not None
    assert failed.detail["overran"] is True
    assert "carved cap" in failed.thought
    assert len(_records(chain, StrategyEvent.PLAN_REVISED)) == 1
    fake_llm.verify()


async def test_a_tool_step_runs_beside_a_reasoning_step_in_one_wave(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(
        MODEL,
        (PLANNING,),
        _plan(
            _step("add", type="tool", tool="calculator", arguments={"expression": "3+4"}),
            _step("recall"),
            _step("combine", "add", "recall"),
        ),
    )
    fake_llm.script_matching(MODEL, ("This step: do recall",), Reply.text("twelve"))
    fake_llm.script_matching(MODEL, ("This step: do combine",), Reply.text("84"))
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("84"))
    events, chain = await _run(runtime, "12*(3+4)?")
    assert _completed(events).answer == "84"
    calls = [s.tool_call.tool_name for s in chain.steps if s.tool_call is not None]
    assert calls == ["llm", "calculator", "llm", "llm", "llm"]
    combine = _step_requests(fake_llm)["combine"].body["messages"][-1]["content"]
    assert '"result": 7' in combine
    assert "[recall] twelve" in combine
    fake_llm.verify()


@pytest.mark.parametrize("stored", [0, 1, 2])
async def test_a_resumed_plan_makes_no_finished_steps_call_again(
    runtime: AgentRuntime, fake_llm: FakeLLMServer, stored: int
) -> None:
    """A run stopped in its second wave (after `stored` of its two results were stored)
    resumes from its stored steps: the same plan, and only the calls whose results were not
    stored are made again."""

    def script(fresh: set[str]) -> None:
        if "plan" in fresh:
            fake_llm.script_matching(
                MODEL,
                (PLANNING,),
                _plan(_step("a1"), _step("b1"), _step("a2", "a1"), _step("b2", "b1")),
            )
        for step in ("a1", "b1", "a2", "b2"):
            if step in fresh:
                fake_llm.script_matching(
                    MODEL, (f"This step: do {step}",), Reply.text(f"out-{step}")
                )
        fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("done"))

    script({"plan", "a1", "b1", "a2", "b2"})
    events, first = await _run(runtime, "Two branches.")
    steps = first.steps
    second_wave = [s for s in steps if s.tool_result is not None][3:5]
    cut = steps.index(second_wave[0]) + stored
    fake_llm.reset()
    # The wave's results are stored in call order: a2's, then b2's.
    fresh = [{"a2", "b2"}, {"b2"}, set()][stored]
    script(fresh)
    chain = ReasoningChain(task_id="plan-task", agent_id="plan", id=first.id)
    chain.replay([s.model_copy(deep=True) for s in steps[:cut]])
    events, resumed = await _run(runtime, "Two branches.", chain=chain)
    assert _completed(events).answer == "done"
    assert [s.id for s in resumed.steps[:cut]] == [s.id for s in steps[:cut]]
    assert set(_step_requests(fake_llm)) == fresh
    fake_llm.verify()


async def test_auto_runs_a_plan_for_a_task_its_table_scores_high(
    runtime: AgentRuntime, fake_llm: FakeLLMServer
) -> None:
    fake_llm.script_matching(
        MODEL, ("Rate how complex",), Reply.text('{"complexity": 0.9, "reason": "many parts"}')
    )
    fake_llm.script_matching(MODEL, (PLANNING,), _plan(_step("only")))
    fake_llm.script_matching(MODEL, ("This step: do only",), Reply.text("part"))
    fake_llm.script_matching(MODEL, (SYNTHESIS,), Reply.text("whole"))
    table = (
        ComplexityBand(below=0.3, strategy="direct"),
        ComplexityBand(below=0.6, strategy="cot"),
        ComplexityBand(below=1.0, strategy="plan"),
    )
    spec = AgentSpec(kind="auto", strategy=StrategyOptions(auto=AutoOptions(table=table)))
    task = AgentTask(input="A big task.")
    run = runtime.agent_for(spec).start(task)
    events = [event async for event in run.events()]
    assert _completed(events).answer == "whole"
    [selected] = _records(run.chain, StrategyEvent.STRATEGY_SELECTED)
    assert selected.detail is not None
    assert selected.detail["strategy"] == "plan"
    fake_llm.verify()
