"""`on_limit: answer`: the one last, tool-less call an agent keeps back, and when to make it.

Without it (`on_limit: fail`) a limit ends the task `failed` and whatever the run found is
lost. With it, the run answers from what it has, and the task ends `incomplete`, naming the
limit in its `stop_reason`:

- `max_iterations`: the agent's own loop. An agent that used its N iterations without an
  answer makes the final call as call N+1; a run that answers within N iterations is the same
  under either setting.
- `max_llm_calls`, `max_tokens`, `max_cost_usd` (the task's budget): before each ordinary LLM
  call the agent checks, with the estimate the budget guard makes, that after that call at its
  worst case enough would remain for the final call: its prompt the current one plus what that
  call may add (its whole output cap), its own output as much of the agent's cap as fits but
  at least `FINAL_MIN_TOKENS`. If not, it makes the final call now, with its output capped to
  what remains. The guard still checks every call, so a budget is never crossed.
- `max_steps` and `max_duration_s` are not covered: they end the task `failed` as before (a
  duration cannot be kept back for; it passes while the model answers).

Tool results added after a check are not kept back for: a run whose tools return a lot just
before a limit gets a shorter final answer, or, when not even the prompt fits any more, fails
as it would with `fail`.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.agents.engine import ReasoningEngine
from app.chain.models import StopReason
from app.tools.models import CallEstimate

FINAL_MIN_TOKENS = 256
"""The fewest output tokens the final answer is kept back for (fewer when the agent's own
output cap is lower)."""

_WHY = {
    "max_iterations": "you have used all {value} iterations this task allows",
    "max_llm_calls": "this task's budget allows only one more model call",
    "max_tokens": "this task's token budget leaves room for only one more reply",
    "max_cost_usd": "this task's cost budget leaves room for only one more reply",
}


def limit_message(reason: StopReason, value: Any, *, text_format: bool) -> dict[str, str]:
    """What the model is told before the final call: why, and that it has no tools left."""
    why = _WHY[reason].format(value=value)
    if text_format:
        content = (
            f"Observation: {why}. You cannot use tools any more. Reply now with Thought and "
            "Final Answer, as well as you can from what you have found so far."
        )
    else:
        content = (
            f"Note: {why}. You cannot call tools any more. Answer now, as well as you can from "
            "what you have found so far."
        )
    return {"role": "user", "content": content}


@dataclass(frozen=True, slots=True)
class FinalCallReserve:
    """Keeps back the final call of one run, against the budget of its chain."""

    engine: ReasoningEngine
    max_tokens: int | None
    """The agent's output cap (None: the gateway's default)."""
    response_format: dict[str, Any] | None
    text_format: bool

    async def stop_before(
        self, messages: list[dict[str, Any]], tools: list[str] | None, *, calls: int = 1
    ) -> StopReason | None:
        """The budget that calls for the final call instead of `calls` ordinary calls with
        about `messages` and `tools` (each priced as one with `messages`); None while they
        and the final call still fit."""
        chain = self.engine.chain
        budget = chain.budget
        if budget is None:
            return None
        used = chain.usage()
        # The pending calls and the final one.
        if budget.max_llm_calls is not None and used.llm_calls + calls + 1 > budget.max_llm_calls:
            return "max_llm_calls"
        if budget.max_tokens is None and budget.max_cost_usd is None:
            return None
        ordinary = await self.engine.estimate_llm(
            messages, tools=tools, max_tokens=self.max_tokens, response_format=self.response_format
        )
        if ordinary is None:
            return None  # the call cannot be made as asked: let it fail as it would
        final = await self.engine.estimate_llm(
            self._final_messages(messages),
            max_tokens=min(FINAL_MIN_TOKENS, ordinary.max_output_tokens),
            response_format=self.response_format,
            added_input_tokens=ordinary.max_output_tokens,
        )
        if final is None:
            return None
        if budget.max_tokens is not None:
            needed = _tokens(ordinary) * calls + _tokens(final)
            if used.tokens + needed > budget.max_tokens:
                return "max_tokens"
        if budget.max_cost_usd is not None and ordinary.cost_usd is not None:
            # An unpriced model cannot be kept back for; the guard refuses its calls anyway.
            needed_usd = ordinary.cost_usd * calls + (final.cost_usd or Decimal(0))
            if used.cost_usd + needed_usd > budget.max_cost_usd:
                return "max_cost_usd"
        return None

    async def affords_final(self, messages: list[dict[str, Any]], model: str | None = None) -> bool:
        """Whether what remains of the budget pays for the final call with `messages` on
        `model` (default: the run's), its answer at least `FINAL_MIN_TOKENS` long."""
        budget = self.engine.chain.budget
        if budget is None:
            return True
        if (
            budget.max_llm_calls is not None
            and self.engine.chain.usage().llm_calls + 1 > budget.max_llm_calls
        ):
            return False
        shortest = min(FINAL_MIN_TOKENS, self.max_tokens or FINAL_MIN_TOKENS)
        return (await self._fits(messages, shortest, model))[0]

    async def final_max_tokens(
        self, messages: list[dict[str, Any]], model: str | None = None
    ) -> int | None:
        """The output cap of the final call with `messages` (on `model`, default: the run's):
        the agent's own when it fits what remains of the budget, else the most that fits
        (None: the agent's own; the guard then refuses a call that cannot fit at all)."""
        budget = self.engine.chain.budget
        if budget is None or (budget.max_tokens is None and budget.max_cost_usd is None):
            return None
        whole, cap = await self._fits(messages, self.max_tokens, model)
        if whole or cap <= 1:
            return self.max_tokens
        # The largest cap that fits: costs and tokens grow with it.
        low, high = 0, cap
        while high - low > 1:
            middle = (low + high) // 2
            if (await self._fits(messages, middle, model))[0]:
                low = middle
            else:
                high = middle
        return low or self.max_tokens

    async def _fits(
        self, messages: list[dict[str, Any]], max_tokens: int | None, model: str | None
    ) -> tuple[bool, int]:
        """Whether a call with `messages` and output cap `max_tokens` fits the token and
        cost budget left, and the output cap it was estimated with."""
        budget = self.engine.chain.budget
        if budget is None or (budget.max_tokens is None and budget.max_cost_usd is None):
            return True, 0
        estimate = await self.engine.estimate_llm(
            messages, max_tokens=max_tokens, response_format=self.response_format, model=model
        )
        if estimate is None:
            return True, 0
        used = self.engine.chain.usage()
        within_tokens = (
            budget.max_tokens is None or used.tokens + _tokens(estimate) <= budget.max_tokens
        )
        within_cost = (
            budget.max_cost_usd is None
            or estimate.cost_usd is None
            or used.cost_usd + estimate.cost_usd <= budget.max_cost_usd
        )
        return within_tokens and within_cost, estimate.max_output_tokens

    def _final_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The longest of the messages the final call may add, so the count is not short.
        note = limit_message("max_cost_usd", None, text_format=self.text_format)
        return [*messages, note]


def _tokens(estimate: CallEstimate) -> int:
    return estimate.input_tokens + estimate.max_output_tokens
