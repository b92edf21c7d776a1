"""`tot`, a tree of thoughts searched breadth first: at each level every kept thought is
extended by the model's proposals for the next step, each proposal scored by the model, and
the `beam` best go on; after `depth` levels the answer is written from the best path.

Every node is a `thinking` step (`event: thought`) whose `parent_step_id` is its parent's
node (none at the first level) and whose `detail` names the call that proposed it; its score
is a `thought_scored` step under it, the path answered from a `path_chosen` step. A level's
proposals are one batch of calls, its scores another: recorded in order, so a resumed run
repeats them step for step."""

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.agents.engine import LLMCallResult, ReasoningEngine
from app.agents.models import AgentTask
from app.agents.strategies.common import (
    Answer,
    StrategyAgent,
    json_object,
    judgement,
    succeeded,
)
from app.chain import ErrorCode, StrategyEvent
from app.chain.errors import ChainAbort

PROPOSE_PROMPT = """\
You are exploring ways to solve a task, one step at a time. Given the task and the steps \
taken so far, propose {breadth} different possible next steps, each a short thought that \
moves towards the answer. Reply with only JSON: {{"thoughts": ["<step>", ...]}}."""

EVALUATE_PROMPT = """\
You judge partial solutions. Given the task and the steps taken so far, rate how likely \
these steps are to lead to a correct answer, from 0 (a dead end) to 1 (certainly right). \
Reply with only JSON: {"score": <0 to 1>, "reason": "<one sentence>"}."""

ANSWER_PROMPT = """\
Write the final answer to the task, following the reasoning steps given. Reply with the \
answer alone."""

_LISTED = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(?P<item>.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _Node:
    step_id: UUID
    thought: str
    score: float
    path: tuple["_Node", ...]  # its ancestors, root first

    @property
    def thoughts(self) -> list[str]:
        return [node.thought for node in (*self.path, self)]

    @property
    def step_ids(self) -> list[UUID]:
        return [node.step_id for node in (*self.path, self)]


class TreeOfThoughtsAgent(StrategyAgent):
    """Tree of thoughts, breadth first with a beam (`strategy.tot`: breadth, depth, beam)."""

    agent_id = "tot"
    strategy = "tot"

    async def solve(self, task: AgentTask, engine: ReasoningEngine) -> Answer:
        options = self.options.tot
        frontier: list[_Node | None] = [None]  # None: the root, before any thought
        kept: list[_Node] = []
        limit = None
        for depth in range(1, options.depth + 1):
            # The level's proposals and their scores, the answer kept back for after them.
            calls = len(frontier) * (1 + options.breadth)
            longest = self._messages(task, PROPOSE_PROMPT, frontier[-1])
            limit = await self.limit_reached(engine, longest, calls=calls)
            if limit is not None:
                break
            candidates = await self._expand(task, engine, frontier, depth)
            if not candidates:
                break
            scored = await self._score(task, engine, candidates)
            scored.sort(key=lambda node: node.score, reverse=True)
            kept = scored[: options.beam]
            frontier = list(kept)
        messages = self.conversation(task, self.system_prompt(ANSWER_PROMPT))
        if not kept and limit is not None:
            return await self.final_answer(engine, messages, limit, [])
        if not kept:
            raise ChainAbort(ErrorCode.LLM_ERROR, "the model proposed no thoughts to explore")
        best = kept[0]
        engine.add_thinking(
            f"Answering from the best path (score {best.score:.2f}): " + " → ".join(best.thoughts),
            confidence=best.score,
            parent_step_id=best.step_id,
            event=StrategyEvent.PATH_CHOSEN,
            detail={"path": [str(step) for step in best.step_ids], "score": best.score},
        )
        steps = "\n".join(f"{n}. {thought}" for n, thought in enumerate(best.thoughts, 1))
        messages.append({"role": "user", "content": f"Reasoning steps:\n{steps}"})
        if limit is not None:
            return await self.final_answer(
                engine, messages, limit, best.step_ids, parent_step_id=best.step_id
            )
        reply = await self.call(engine, messages, parent_step_id=best.step_id)
        return Answer((reply.content or "").strip(), [*best.step_ids, reply.step_id], best.score)

    async def _expand(
        self,
        task: AgentTask,
        engine: ReasoningEngine,
        frontier: list[_Node | None],
        depth: int,
    ) -> list[tuple[_Node | None, str, UUID]]:
        """Each frontier node's proposals, one call per node, recorded as its children:
        (parent, thought, step id)."""
        breadth = self.options.tot.breadth
        system = self.system_prompt_plain(PROPOSE_PROMPT.format(breadth=breadth))
        requests = [self._messages(task, system, node) for node in frontier]
        replies = await engine.call_llms(requests, temperature=self.temperature, model=self.model)
        if not any(reply.success for reply in replies):
            succeeded(replies[0])  # raises the calls' failure
        children: list[tuple[_Node | None, str, UUID]] = []
        for node, reply in zip(frontier, replies, strict=True):
            for index, thought in enumerate(_proposals(reply)[:breadth]):
                step = engine.add_thinking(
                    thought,
                    parent_step_id=None if node is None else node.step_id,
                    event=StrategyEvent.THOUGHT,
                    detail={"depth": depth, "index": index, "call": str(reply.step_id)},
                )
                children.append((node, thought, step.id))
        return children

    async def _score(
        self,
        task: AgentTask,
        engine: ReasoningEngine,
        candidates: list[tuple[_Node | None, str, UUID]],
    ) -> list[_Node]:
        """Every candidate scored by the model, one call each, in one batch."""
        system = self.system_prompt_plain(EVALUATE_PROMPT)
        requests = []
        for parent, thought, _ in candidates:
            thoughts = [*(parent.thoughts if parent else []), thought]
            requests.append(self._messages(task, system, None, thoughts))
        replies = await engine.call_llms(requests, temperature=0, model=self.model)
        nodes = []
        for (parent, thought, step_id), reply in zip(candidates, replies, strict=True):
            score, reason = judgement(reply)
            engine.add_thinking(
                f"{score:.2f}: {reason}",
                confidence=score,
                parent_step_id=step_id,
                event=StrategyEvent.THOUGHT_SCORED,
                detail={"score": score, "call": str(reply.step_id)},
            )
            path = () if parent is None else (*parent.path, parent)
            nodes.append(_Node(step_id, thought, score, path))
        return nodes

    def _messages(
        self,
        task: AgentTask,
        system: str,
        node: _Node | None,
        thoughts: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        messages = self.conversation(task, system)
        if thoughts is None:
            thoughts = [] if node is None else node.thoughts
        listed = "\n".join(f"{n}. {thought}" for n, thought in enumerate(thoughts, 1))
        messages.append({"role": "user", "content": f"Steps so far:\n{listed or '(none yet)'}"})
        return messages


def _proposals(reply: LLMCallResult) -> list[str]:
    """The thoughts a proposal reply lists: its JSON `thoughts`, else its list items; none
    from a failed call."""
    if not reply.success:
        return []
    content = reply.content or ""
    document = json_object(content)
    if document is not None and isinstance(document.get("thoughts"), list):
        items = [item for item in document["thoughts"] if isinstance(item, str)]
    else:
        items = [match["item"] for match in _LISTED.finditer(content)]
    return [item.strip() for item in items if item.strip()]
