"""`auto`: the strategy follows from the task's complexity, within what the run's budget can
pay, and a strategy that fails hands the task to the next simpler one, down to `direct`.

The complexity (0 to 1) is a cheap model call's judgement against a stated rubric, or, with
`assess: heuristic` (or when that call fails), a score from the task's wording; either is
recorded (`complexity_assessed`), then the strategy chosen from the agent's table
(`strategy_selected`, with the strategies the budget could not pay for), then each fallback
(`strategy_fallback`, with the failure's code and message). A strategy fails when it raises
a failure a simpler one may not meet — the model's error, an answer that misses the
`response_format`, running out of iterations, a tool's failure — or answers less sure than
`min_confidence`; limits of the run (budget, rate, model policy, cancellation) end it as
they would any run."""

import re
from dataclasses import dataclass
from typing import Self

from app.agents.base import AgentParts, CoTAgent
from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.agents.react import ReActAgent
from app.agents.spec import SIMPLER, AgentSpec, StrategyOptions
from app.agents.strategies.common import StrategyAgent, json_object, score_of, task_text
from app.agents.strategies.mcts import MonteCarloAgent
from app.agents.strategies.plan import PlanAgent
from app.agents.strategies.simple import ChainOfThoughtAgent, DirectAgent
from app.agents.strategies.tot import TreeOfThoughtsAgent
from app.chain import BudgetLimit, ErrorCode, StrategyEvent
from app.chain.errors import ChainAbort
from app.tools.errors import GuardRejection

ASSESS_PROMPT = """\
Rate how complex the task below is to answer well, from 0 to 1, by this rubric:
- 0.0 to 0.3: a fact, a definition, a short reply or a single easy step.
- 0.3 to 0.6: a few steps of reasoning, or one calculation, but no outside information.
- 0.6 to 1.0: it needs tools or data (look-ups, files, the web, exact arithmetic over many \
values), several sources, or a plan of many dependent steps.
Reply with only JSON: {"complexity": <0 to 1>, "reason": "<one sentence>"}."""

FALLBACK_CODES = frozenset(
    {
        ErrorCode.LLM_ERROR,
        ErrorCode.INVALID_OUTPUT,
        ErrorCode.MAX_ITERATIONS,
        ErrorCode.TOOL_ERROR,
        ErrorCode.CONTEXT_WINDOW,
        ErrorCode.TIMEOUT,
    }
)
"""The failures a simpler strategy may not meet: the run falls back on these only."""

STRATEGIES: dict[str, type[CoTAgent]] = {
    "direct": DirectAgent,
    "cot": ChainOfThoughtAgent,
    "react": ReActAgent,
    "tot": TreeOfThoughtsAgent,
    "mcts": MonteCarloAgent,
    "plan": PlanAgent,
}
"""The strategies `auto` chooses among (every built-in kind but itself)."""
_DEEP_WORDS = re.compile(
    r"\b(plan|steps?|compare|analy[sz]e|research|design|evaluate|investigate|strategy|"
    r"trade-?offs?|explain why|prove|derive|first|then|finally)\b",
    re.IGNORECASE,
)
_TOOL_WORDS = re.compile(
    r"\b(calculate|compute|current|today|latest|search|look up|fetch|file|url|https?://)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Assessment:
    complexity: float
    reason: str
    method: str  # "model" or "heuristic"


class AutoAgent(CoTAgent):
    """Chooses a strategy by complexity and budget; falls back to simpler ones."""

    agent_id = "auto"

    def __init__(self, spec: AgentSpec, parts: AgentParts) -> None:
        super().__init__(
            parts.executor,
            default_model=spec.model or parts.default_model,
            max_output_tokens=spec.max_output_tokens or parts.max_output_tokens,
        )
        self.spec = spec
        self.parts = parts
        self.options = spec.strategy or StrategyOptions()

    @classmethod
    def from_spec(cls, spec: AgentSpec, parts: AgentParts) -> Self:
        return cls(spec, parts)

    def build(self, name: str) -> CoTAgent:
        spec = self.spec.model_copy(update={"kind": name})
        agent = STRATEGIES[name].from_spec(spec, self.parts)
        agent.compact_at = self.compact_at
        return agent

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        assessment = await self._assess(task, engine)
        engine.add_thinking(
            f"Task complexity {assessment.complexity:.2f} ({assessment.method}): "
            f"{assessment.reason}",
            event=StrategyEvent.COMPLEXITY_ASSESSED,
            detail={"complexity": assessment.complexity, "method": assessment.method},
        )
        chosen = self._band(assessment.complexity)
        order = list(SIMPLER[SIMPLER.index(chosen) :])
        excluded = [name for name in order[:-1] if not await self._affordable(name, engine)]
        order = [name for name in order if name not in excluded]
        why = f"complexity {assessment.complexity:.2f} maps to {chosen}"
        if excluded:
            why += f"; the budget left cannot pay for {', '.join(excluded)}"
        # Not even one call on the run's model: the agent's cheaper model, if it can pay.
        model = None
        fallback = self.spec.fallback_model
        if (
            fallback is not None
            and not await self._affordable("direct", engine)
            and await self._affordable("direct", engine, fallback)
        ):
            model = fallback
            why += f"; on {fallback}, the agent's fallback model, which it can pay for"
        engine.add_thinking(
            f"Strategy {order[0]}: {why}",
            event=StrategyEvent.STRATEGY_SELECTED,
            detail={
                "strategy": order[0],
                "complexity": assessment.complexity,
                "table": chosen,
                "excluded": excluded,
                "model": model,
            },
        )
        for index, name in enumerate(order):
            try:
                await self._run(name, task, engine, model)
                return
            except ChainAbort as exc:
                last = index == len(order) - 1
                if last or isinstance(exc, GuardRejection) or exc.error_code not in FALLBACK_CODES:
                    raise
                following = order[index + 1]
                engine.add_thinking(
                    f"Strategy {name} failed ({exc.error_code}): {exc.message}; falling back "
                    f"to {following}",
                    event=StrategyEvent.STRATEGY_FALLBACK,
                    detail={
                        "from": name,
                        "to": following,
                        "error_code": exc.error_code.value,
                        "reason": exc.message,
                    },
                )

    async def _run(
        self, name: str, task: AgentTask, engine: ReasoningEngine, model: str | None
    ) -> None:
        agent = self.build(name)
        engine.use_strategy(name)  # its calls are billed to it; the assessment was auto's
        if isinstance(agent, StrategyAgent):
            agent.model = model
            answer = await agent.solve(task, engine)
            await agent.conclude(engine, answer, min_confidence=self.options.min_confidence)
        else:
            await agent.reason(task, engine)

    def _band(self, complexity: float) -> str:
        for band in self.options.auto.table:
            if complexity < band.below:
                return band.strategy
        return self.options.auto.table[-1].strategy

    async def _assess(self, task: AgentTask, engine: ReasoningEngine) -> Assessment:
        auto = self.options.auto
        if auto.assess == "heuristic":
            return heuristic(task, "the agent or its tenant asks for the heuristic")
        messages = [
            {"role": "system", "content": ASSESS_PROMPT},
            {"role": "user", "content": task_text(task)},
        ]
        # The assessment must leave the budget at least one call for the answer.
        if not await self._affordable_calls(engine, 2):
            return heuristic(task, "the budget left is kept for the answer")
        reply = await engine.call_llm(messages=messages, temperature=0, stream=False)
        if not reply.success:
            info = reply.result.info
            return heuristic(task, f"the assessing call failed ({info.error_code})")
        document = json_object(reply.content or "") or {}
        complexity = score_of(document.get("complexity"))
        if complexity is None:
            return heuristic(task, "the assessing reply held no complexity from 0 to 1")
        reason = document.get("reason")
        stated = reason.strip() if isinstance(reason, str) and reason.strip() else "no reason"
        return Assessment(complexity, stated, "model")

    async def _affordable(
        self, name: str, engine: ReasoningEngine, model: str | None = None
    ) -> bool:
        """Whether what is left of the run's budget can pay for `name`'s calls, each as the
        budget's guard estimates a call of the task's conversation on `model` (default: the
        run's)."""
        return await self._affordable_calls(engine, self._calls(name), model)

    async def _affordable_calls(
        self, engine: ReasoningEngine, calls: int, model: str | None = None
    ) -> bool:
        left = engine.chain.left()
        if not left:
            return True
        llm_calls = left.get(BudgetLimit.MAX_LLM_CALLS)
        if llm_calls is not None and calls > llm_calls:
            return False
        if BudgetLimit.MAX_COST_USD not in left and BudgetLimit.MAX_TOKENS not in left:
            return True
        estimate = await engine.estimate_llm(engine.task.conversation(), model=model)
        if estimate is None:
            return True
        cost, tokens = left.get(BudgetLimit.MAX_COST_USD), left.get(BudgetLimit.MAX_TOKENS)
        if cost is not None and estimate.cost_usd is not None and estimate.cost_usd * calls > cost:
            return False
        per_call = estimate.input_tokens + estimate.max_output_tokens
        return tokens is None or per_call * calls <= tokens

    def _calls(self, name: str) -> int:
        """The LLM calls `name` makes: a search's full tree (an MCTS simulation's step,
        rollout and score), ReAct's tool round and answer at the fewest, one for the
        others."""
        if name == "mcts":
            return 3 * self.options.mcts.simulations
        if name == "plan":  # the plan, a call per step at its largest, the answer
            return 2 + self.options.plan.max_steps
        if name == "tot":
            tot = self.options.tot
            first = 1 + tot.breadth
            later = (tot.depth - 1) * (tot.beam + tot.beam * tot.breadth)
            return first + later + 1
        if name == "react":
            return 2
        return 1


def heuristic(task: AgentTask, why: str) -> Assessment:
    """A complexity from the task's wording alone: its length, how many questions it asks,
    words of multi-step work, words that call for tools."""
    text = task_text(task)
    words = len(text.split())
    score = 0.1
    score += 0.15 if words > 40 else 0.0
    score += 0.15 if words > 150 else 0.0
    score += min(0.3, 0.1 * len(_DEEP_WORDS.findall(text)))
    score += 0.15 if text.count("?") > 1 else 0.0
    score += 0.2 if _TOOL_WORDS.search(text) else 0.0
    complexity = round(min(1.0, score), 2)
    return Assessment(complexity, f"from the task's wording ({why})", "heuristic")
