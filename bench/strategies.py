"""The strategies' own cost: framework CPU per LLM call step of each built-in strategy, over a
plain one-call task's; and the wall time of a plan whose independent steps each wait 1 s for
the model, against the same steps one after another.

CPU: an instant in-process model registered as the `llm` tool answers each strategy's requests
(a plan, proposals, scores, an answer) at once, so what is measured is everything the
strategies do around a call — prompts, parsing, records, the executor's batches — with the
executor, chain and events as the service runs them. Wall time: the fake OpenAI-compatible
server in its own process, its replies to the plan's steps 1 s late, through LiteLLM's HTTP
path; the plan itself and the answer instant."""

import asyncio
import gc
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.agents import AgentRuntime, AgentSpec, AgentTask
from app.agents.base import AgentParts
from app.agents.kinds import AgentKinds
from app.agents.spec import MonteCarloOptions, PlanOptions, StrategyOptions, TreeSearchOptions
from app.chain import StrategyEvent
from app.llm import LLMGateway, load_model_list
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from bench.step_overhead import InstantLLM

KINDS = ("direct", "cot", "tot", "mcts", "plan")
_PLAN = {
    "steps": [{"id": f"s{n}", "description": f"part {n}", "strategy": "direct"} for n in range(4)]
}
_OPTIONS = StrategyOptions(
    tot=TreeSearchOptions(breadth=3, depth=2, beam=2),
    mcts=MonteCarloOptions(simulations=6, breadth=2, max_depth=3),
    plan=PlanOptions(max_parallel_steps=4),
)


def _reply(messages: list[dict[str, Any]]) -> str:
    """What a model says to each strategy's request, read from its system prompt."""
    system = str(messages[0].get("content", ""))
    if '{"steps":' in system:
        return json.dumps(_PLAN)
    if '{"thoughts":' in system:
        return json.dumps({"thoughts": ["one way", "another way", "a third way"]})
    if '{"score":' in system:
        return json.dumps({"score": 0.5 + 0.01 * len(messages), "reason": "fine"})
    if "`Answer:`" in system:
        return "Reasoning.\nConfidence: 0.8\nAnswer: 42"
    return "42"


class InstantModel(InstantLLM):
    """The `llm` tool answering every strategy's request at once."""

    def reply(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        content = _reply(arguments["messages"])
        return {"content": content, "tool_calls": [], "finish_reason": "stop"}, 100


@dataclass(frozen=True)
class KindCost:
    kind: str
    tasks: int
    llm_calls: int
    cpu_s: float

    @property
    def cpu_ms_per_call(self) -> float:
        return self.cpu_s * 1000 / self.llm_calls


@dataclass(frozen=True)
class PlanWall:
    delay_s: float
    one_branch_s: float
    four_branches_s: float
    four_in_a_row_s: float

    @property
    def speed_up(self) -> float:
        return self.four_in_a_row_s / self.four_branches_s


async def _cpu(kind: str, tasks: int) -> KindCost:
    registry = ToolRegistry([InstantModel()])
    executor = ToolExecutor(registry)
    gateway = LLMGateway(load_model_list(None))  # asked only whether it calls tools natively
    parts = AgentParts(
        executor, gateway, default_model="demo", max_iterations=10, max_output_tokens=None
    )
    agent = AgentKinds().build(AgentSpec(kind=kind, strategy=_OPTIONS), parts)
    for _ in range(max(1, tasks // 10)):  # warm-up
        async for _event in agent.process_task(AgentTask(input="bench")):
            pass
    gc.collect()
    gc.freeze()
    calls = 0
    cpu = time.process_time()
    for _ in range(tasks):
        run = agent.start(AgentTask(input="bench"))
        async for _event in run.events():
            pass
        calls += run.chain.metrics.llm_calls
    return KindCost(kind, tasks, calls, time.process_time() - cpu)


async def _wall(delay_s: float, directory: Path) -> PlanWall:
    # The tests' fake model and model list, in this process: its replies wait in sleeps.
    from tests.factories import fake_deployment, runtime_for
    from tests.fakes.openai_server import FakeLLMServer, Reply

    model = "plan-bench"
    async with FakeLLMServer(record_requests=False) as server:
        runtime = runtime_for(directory, [fake_deployment(server, model)], default_model=model)
        timings = []
        for steps in (_PLAN["steps"][:1], _PLAN["steps"], _chained(_PLAN["steps"])):
            server.reset()
            plan = Reply.text(json.dumps({"steps": steps}))
            server.script_matching(model, ("Plan how to do the task",), plan)
            for step in steps:
                late = Reply.text("ok", delay_s=delay_s)
                server.script_matching(model, (f"This step: {step['description']}",), late)
            server.script_matching(model, ("results of the plan's steps",), Reply.text("done"))
            timings.append(await _timed_plan(runtime))
    return PlanWall(delay_s, *timings)


def _chained(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**step, "depends_on": [steps[index - 1]["id"]]} if index else step
        for index, step in enumerate(steps)
    ]


async def _timed_plan(runtime: AgentRuntime) -> float:
    """The wall time of one plan task's steps: its first step's start to the plan's end (the
    plan's and the answer's calls left out)."""
    run = runtime.agent_for(AgentSpec(kind="plan", strategy=_OPTIONS)).start(
        AgentTask(input="bench")
    )
    async for _event in run.events():
        pass
    at = {
        step.thinking.event: step.timestamp
        for step in reversed(run.chain.steps)
        if step.thinking is not None and step.thinking.event is not None
    }
    return (at[StrategyEvent.PLAN_COMPLETED] - at[StrategyEvent.PLAN_STEP_STARTED]).total_seconds()


def run(tasks: int = 100, delay_s: float = 1.0) -> tuple[list[KindCost], PlanWall]:
    async def main() -> tuple[list[KindCost], PlanWall]:
        costs = [await _cpu(kind, tasks) for kind in KINDS]
        with tempfile.TemporaryDirectory() as directory:
            wall = await _wall(delay_s, Path(directory))
        return costs, wall

    return asyncio.run(main())
