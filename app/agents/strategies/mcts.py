"""`mcts`, Monte Carlo tree search over ReAct trajectories. Each simulation selects a node by
UCB1 from the root down to one not yet fully expanded, expands it by one ReAct step (the
model calls tools, writes a reasoning step, or answers), rolls the new node out to an answer
(one tool-less call; none when the step answered), has the model score that answer, and adds
the score to every node on the path. After `simulations` the best-scored answer is the run's.

Only idempotent tools are offered: a search makes calls on branches it then abandons, and a
call with side effects must not be made for a branch never taken. Every node is a `thinking`
step (`event: thought`) under its parent's (none under the root), every simulation's score a
`thought_scored` step under the node it rolled out (`detail`: the simulation, the score, the
rollout's answer), the answer's path a `path_chosen` step. Calls are made one at a time, so a
resumed run repeats them step for step."""

import json
import math
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from app.agents.engine import ModelToolCall, ReasoningEngine
from app.agents.models import AgentTask
from app.agents.react import tool_turn
from app.agents.strategies.common import (
    Answer,
    StrategyAgent,
    judgement,
    split_answer,
    split_reasoning,
    succeeded,
    task_text,
)
from app.chain import StrategyEvent
from app.tools.results import ToolInvocation

STEP_PROMPT = """\
Work towards the task's answer one step at a time. Take one step now: call a tool, or write \
one short reasoning step, or, when you know the answer, write `Answer:` followed by the \
final answer alone."""

TRIED = "Steps already tried from here (take a different one):\n{tried}"

ROLLOUT_PROMPT = """\
From the task and the steps so far, give the final answer now, without tools. Reply with \
the answer alone."""

JUDGE_PROMPT = """\
You judge answers. Given the task and a proposed answer, rate how likely the answer is \
correct and complete, from 0 to 1. Reply with only JSON: \
{"score": <0 to 1>, "reason": "<one sentence>"}."""


@dataclass(eq=False, slots=True)
class _Node:
    parent: "_Node | None"
    messages: list[dict[str, Any]]  # the conversation that leads here
    depth: int
    step_id: UUID | None = None  # its thought step; None for the root
    label: str = ""  # what its step did, as siblings are told
    answer: str | None = None  # set when the step answered
    sources: list[UUID] = field(default_factory=list)  # tool results on the way here
    children: list["_Node"] = field(default_factory=list)
    visits: int = 0
    total: float = 0.0

    def ucb1(self, exploration: float) -> float:
        assert self.parent is not None
        if self.visits == 0:
            return math.inf
        mean = self.total / self.visits
        return mean + exploration * math.sqrt(math.log(self.parent.visits) / self.visits)

    @property
    def path(self) -> list["_Node"]:
        nodes, node = [], self
        while node.parent is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


@dataclass(slots=True)
class _Outcome:
    score: float
    answer: str
    node: _Node
    reply_id: UUID | None  # the call that wrote the answer (the rollout's), if not the node's


class MonteCarloAgent(StrategyAgent):
    """Monte Carlo tree search (`strategy.mcts`: simulations, breadth, max_depth,
    exploration)."""

    agent_id = "mcts"
    strategy = "mcts"

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        options = self.options.mcts
        system = self.system_prompt_plain(STEP_PROMPT)
        root = _Node(None, self.conversation(task, system), 0)
        tools = self._tools(engine)
        outcomes: list[_Outcome] = []
        limit = None
        for simulation in range(1, options.simulations + 1):
            node = root
            while (
                node.answer is None
                and node.depth < options.max_depth
                and len(node.children) >= options.breadth
            ):
                node = max(node.children, key=lambda child: child.ucb1(options.exploration))
            expands = node.answer is None and node.depth < options.max_depth
            # A step, its rollout and the score; a node that answered is only scored.
            calls = 3 if expands else 1 if node.answer is not None else 2
            limit = await self.limit_reached(engine, node.messages, calls=calls, tools=tools)
            if limit is not None:
                break
            if expands:
                node = await self._expand(engine, node, tools, simulation)
            outcome = await self._evaluate(task, engine, node, simulation)
            outcomes.append(outcome)
            walked: _Node | None = node
            while walked is not None:
                walked.visits += 1
                walked.total += outcome.score
                walked = walked.parent
        if not outcomes:
            assert limit is not None  # a search makes at least one simulation otherwise
            return await self.final_answer(engine, root.messages, limit, [])
        best = max(outcomes, key=lambda outcome: outcome.score)  # the first of equals
        path = [node.step_id for node in best.node.path if node.step_id is not None]
        engine.add_thinking(
            f"Answering with simulation {outcomes.index(best) + 1}'s answer (score "
            f"{best.score:.2f}): " + " → ".join(node.label for node in best.node.path),
            confidence=best.score,
            parent_step_id=best.node.step_id,
            event=StrategyEvent.PATH_CHOSEN,
            detail={
                "path": [str(step) for step in path],
                "score": best.score,
                "simulations": len(outcomes),
            },
        )
        cited = [*path, *best.node.sources]
        if best.reply_id is not None:
            cited.append(best.reply_id)
        # Stopped by the budget, the best answer found so far is the run's, made already.
        return Answer(best.answer, cited, best.score, stop_reason=limit)

    def _tools(self, engine: ReasoningEngine) -> list[str]:
        """The tools a search may call: the run's idempotent ones, when the model calls
        tools natively."""
        if not self.gateway.supports_native_tools(engine.default_model):
            return []
        return [tool.name for tool in engine.available_tools() if tool.idempotent]

    async def _expand(
        self, engine: ReasoningEngine, node: _Node, tools: list[str], simulation: int
    ) -> _Node:
        """`node`'s next child: one ReAct step of the model's."""
        messages = list(node.messages)
        if node.children:
            tried = "\n".join(f"- {child.label}" for child in node.children)
            messages.append({"role": "user", "content": TRIED.format(tried=tried)})
        reply = succeeded(
            await engine.call_llm(
                messages=messages,
                model=self.model,
                tools=tools or None,
                temperature=self.temperature,
                stream=False,
                parent_step_id=node.step_id,
            )
        )
        child = _Node(node, list(node.messages), node.depth + 1, sources=list(node.sources))
        calls = reply.tool_calls
        if calls:
            results = await engine.call_tools(
                [ToolInvocation(call.name, call.arguments) for call in calls],
                parent_step_id=reply.step_id,
            )
            child.label = "; ".join(_described(call) for call in calls)
            child.messages.extend(tool_turn(reply.content, calls, results))
            child.sources.extend(r.result_step.id for r in results if r.success)
        else:
            content = (reply.content or "").strip()
            reasoning, answer, _ = split_reasoning(content)
            if answer != content:  # it wrote `Answer:`
                child.answer = answer
                child.label = f"answer: {answer}"
                if reasoning:
                    child.label = f"{reasoning} → {child.label}"
            else:
                child.label = content
            child.messages.append({"role": "assistant", "content": content})
            child.sources.append(reply.step_id)
        step = engine.add_thinking(
            child.label,
            parent_step_id=node.step_id,
            event=StrategyEvent.THOUGHT,
            detail={
                "depth": child.depth,
                "index": len(node.children),
                "simulation": simulation,
                "call": str(reply.step_id),
                "answers": child.answer is not None,
            },
        )
        child.step_id = step.id
        node.children.append(child)
        return child

    async def _evaluate(
        self, task: AgentTask, engine: ReasoningEngine, node: _Node, simulation: int
    ) -> _Outcome:
        """`node` rolled out to an answer (its own, if it answered) and that answer scored."""
        reply_id = None
        answer = node.answer
        if answer is None:
            messages = [
                *node.messages,
                {"role": "user", "content": self.system_prompt(ROLLOUT_PROMPT)},
            ]
            rollout = await self.call(engine, messages, stream=False, parent_step_id=node.step_id)
            answer, reply_id = split_answer(rollout.content or ""), rollout.step_id
        judged = [
            {"role": "system", "content": self.system_prompt_plain(JUDGE_PROMPT)},
            {"role": "user", "content": f"Task:\n{task_text(task)}\n\nAnswer:\n{answer}"},
        ]
        reply = await engine.call_llm(
            messages=judged,
            model=self.model,
            temperature=0,
            stream=False,
            parent_step_id=node.step_id,
        )
        score, reason = judgement(reply)
        engine.add_thinking(
            f"{score:.2f}: {reason}",
            confidence=score,
            parent_step_id=node.step_id,
            event=StrategyEvent.THOUGHT_SCORED,
            detail={
                "simulation": simulation,
                "score": score,
                "answer": answer,
                "call": str(reply.step_id),
            },
        )
        return _Outcome(score, answer, node, reply_id)


def _described(call: ModelToolCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return f"{call.name} {arguments}"
