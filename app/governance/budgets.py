"""A task's hard budgets, enforced by the executor's guard at every call.

What a run has used is the chain's own metrics (stored with every step), and the limits are
the chain's budget (stored with the task): nothing of it lives only in this process.
"""

from typing import Any

from app.chain import ErrorCode, ReasoningChain, ToolResultInfo, ToolType, format_usd
from app.chain.budget import Budget, BudgetLimit, Usage
from app.tools.errors import GuardRejection
from app.tools.guards import PendingCall


def budget_exceeded(
    limit: BudgetLimit, budget: Budget, message: str, **details: Any
) -> GuardRejection:
    value = getattr(budget, limit)
    return GuardRejection(
        ErrorCode.BUDGET_EXCEEDED,
        message,
        details={
            "limit": limit.value,
            "limit_value": format_usd(value) if limit is BudgetLimit.MAX_COST_USD else value,
            **details,
        },
    )


class BudgetGuard:
    """Before each call: refuses it when the chain has used its steps, duration or LLM calls,
    or when the call's estimate (prompt tokens counted, its `max_tokens` as output, the
    dearest model that may answer) would cross the token or cost budget. After each call:
    ends the run if its real usage crossed one. Either way the chain ends `budget_exceeded`
    naming the limit, with its steps and costs kept."""

    def __init__(self, chain: ReasoningChain) -> None:
        if chain.budget is None:
            raise ValueError("the chain has no budget to enforce")
        self._chain = chain
        self._budget = chain.budget

    async def before_call(self, call: PendingCall) -> None:
        budget, used = self._budget, self._chain.usage()
        # The call's own step is counted already; its result would be one more.
        if budget.max_steps is not None and used.steps + 1 > budget.max_steps:
            raise budget_exceeded(
                BudgetLimit.MAX_STEPS,
                budget,
                f"budget max_steps ({budget.max_steps}) reached: a call and its result would "
                f"make {used.steps + 1} steps",
                used=used.steps,
            )
        if budget.max_duration_s is not None and used.duration_s >= budget.max_duration_s:
            raise budget_exceeded(
                BudgetLimit.MAX_DURATION_S,
                budget,
                f"budget max_duration_s ({budget.max_duration_s:g} s) reached",
                used=round(used.duration_s, 3),
            )
        is_llm = call.definition.type is ToolType.LLM
        # The pending LLM call is counted already: refuse the one past the limit.
        if is_llm and budget.max_llm_calls is not None and used.llm_calls > budget.max_llm_calls:
            made = used.llm_calls - 1
            raise budget_exceeded(
                BudgetLimit.MAX_LLM_CALLS,
                budget,
                f"budget max_llm_calls ({budget.max_llm_calls}) reached: {made} LLM "
                f"call{'s' if made != 1 else ''} made",
                used=made,
            )
        if budget.max_tokens is None and budget.max_cost_usd is None:
            return
        estimate = await call.estimate()
        if estimate is None:
            return
        if budget.max_tokens is not None:
            tokens = estimate.input_tokens + estimate.max_output_tokens
            if used.tokens + tokens > budget.max_tokens:
                raise budget_exceeded(
                    BudgetLimit.MAX_TOKENS,
                    budget,
                    f"budget max_tokens ({budget.max_tokens}) would be crossed: {used.tokens} "
                    f"used, and this call may use up to {tokens} ({estimate.input_tokens} in, "
                    f"{estimate.max_output_tokens} out)",
                    used=used.tokens,
                    estimate=tokens,
                )
        if budget.max_cost_usd is not None:
            if estimate.cost_usd is None:
                raise budget_exceeded(
                    BudgetLimit.MAX_COST_USD,
                    budget,
                    f"budget max_cost_usd (${format_usd(budget.max_cost_usd)}) cannot be kept: "
                    f"the model of this call has no price",
                    used=format_usd(used.cost_usd),
                )
            if used.cost_usd + estimate.cost_usd > budget.max_cost_usd:
                raise budget_exceeded(
                    BudgetLimit.MAX_COST_USD,
                    budget,
                    f"budget max_cost_usd (${format_usd(budget.max_cost_usd)}) would be "
                    f"crossed: ${format_usd(used.cost_usd)} spent, and this call may cost up "
                    f"to ${format_usd(estimate.cost_usd)}",
                    used=format_usd(used.cost_usd),
                    estimate=format_usd(estimate.cost_usd),
                )

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        crossed = _crossed(self._budget, self._chain.usage())
        if crossed is not None:
            limit, used = crossed
            raise budget_exceeded(
                limit,
                self._budget,
                f"budget {limit} ({_shown(limit, getattr(self._budget, limit))}) crossed by "
                f"the real usage of {call.definition.name}: {_shown(limit, used)}",
                used=_shown(limit, used),
            )

    def abandon(self, call: PendingCall) -> None:
        return None


def _crossed(budget: Budget, used: Usage) -> tuple[BudgetLimit, Any] | None:
    for limit in (BudgetLimit.MAX_COST_USD, BudgetLimit.MAX_TOKENS):
        value = getattr(budget, limit)
        if value is not None and used.of(limit) > value:
            return limit, used.of(limit)
    return None


def _shown(limit: BudgetLimit, value: Any) -> Any:
    return f"${format_usd(value)}" if limit is BudgetLimit.MAX_COST_USD else value
