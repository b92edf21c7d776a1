"""A task's hard budgets, enforced by the executor's guard at every call.

What a run has used is the chain's own metrics (stored with every step), and the limits are
the chain's budget (stored with the task): nothing of it lives only in this process.
"""

from decimal import Decimal
from typing import Any
from uuid import UUID

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
    """Before each call: refuses it when the chain has used its steps or duration, when its
    family (the chain and the sub-agents' chains under it) has used the LLM calls of its own
    budget or of an ancestor's, or when the call's estimate (prompt tokens counted, its
    `max_tokens` as output, the dearest model that may answer) would cross the token or cost
    budget of the chain or of any ancestor, counting what the family's calls under way may
    still use. What the call may use is held until it ends, so parallel sub-agents never
    spend past a budget together. After each call: ends the run if its real usage crossed
    one. Either way the chain ends `budget_exceeded` naming the limit (and the task whose
    budget it is, when it is an ancestor's), with its steps and costs kept."""

    def __init__(self, chain: ReasoningChain) -> None:
        self._chain = chain
        # What each call under way holds (by its call step), given back when it ends.
        self._held: dict[UUID, tuple[Decimal, int]] = {}

    async def before_call(self, call: PendingCall) -> None:
        chain = self._chain
        if chain.budget is not None:
            self._own_limits(chain.budget, chain.usage(), call)
        budgeted = [c for c in (chain, *chain.ancestors) if c.budget is not None]
        is_llm = call.definition.type is ToolType.LLM
        in_sandbox = call.definition.type is ToolType.SANDBOX
        for owner in budgeted:
            assert owner.budget is not None
            used = owner.usage()
            self._calls(owner, owner.budget, used, is_llm)
            if in_sandbox:
                self._sandbox(owner, owner.budget, used)
        if not any(
            c.budget.max_tokens is not None or c.budget.max_cost_usd is not None
            for c in budgeted
            if c.budget is not None
        ):
            return
        estimate = await call.estimate()
        if estimate is None:
            return
        tokens = estimate.input_tokens + estimate.max_output_tokens
        for owner in budgeted:
            assert owner.budget is not None
            self._estimate(owner, owner.budget, owner.usage(), tokens, estimate.cost_usd)
        held = (estimate.cost_usd or Decimal(0), tokens)
        chain.reserve(*held)
        self._held[call.call_step.id] = held

    def _own_limits(self, budget: Budget, used: Usage, call: PendingCall) -> None:
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

    def _sandbox(self, owner: ReasoningChain, budget: Budget, used: Usage) -> None:
        # A sandbox call may run past what is left (to its own CPU limit); the next is refused.
        if budget.max_sandbox_s is not None and used.sandbox_s >= budget.max_sandbox_s:
            raise budget_exceeded(
                BudgetLimit.MAX_SANDBOX_S,
                budget,
                f"{self._whose(owner)}max_sandbox_s ({budget.max_sandbox_s:g} s) reached: "
                f"{used.sandbox_s:g} CPU seconds used in sandboxes{self._family(owner)}",
                used=used.sandbox_s,
                **self._task(owner),
            )

    def _calls(self, owner: ReasoningChain, budget: Budget, used: Usage, is_llm: bool) -> None:
        # The pending LLM call is counted already: refuse the one past the limit.
        if is_llm and budget.max_llm_calls is not None and used.llm_calls > budget.max_llm_calls:
            made = used.llm_calls - 1
            raise budget_exceeded(
                BudgetLimit.MAX_LLM_CALLS,
                budget,
                f"{self._whose(owner)}max_llm_calls ({budget.max_llm_calls}) reached: {made} LLM "
                f"call{'s' if made != 1 else ''} made{self._family(owner)}",
                used=made,
                **self._task(owner),
            )

    def _estimate(
        self,
        owner: ReasoningChain,
        budget: Budget,
        used: Usage,
        tokens: int,
        cost_usd: Decimal | None,
    ) -> None:
        held_cost, held_tokens = owner.reserved
        left = owner.left(used)
        if budget.max_tokens is not None and tokens > left[BudgetLimit.MAX_TOKENS]:
            raise budget_exceeded(
                BudgetLimit.MAX_TOKENS,
                budget,
                f"{self._whose(owner)}max_tokens ({budget.max_tokens}) would be crossed: "
                f"{used.tokens} used{self._family(owner)}"
                f"{f', {held_tokens} held by calls under way' if held_tokens else ''}, "
                f"and this call may use up to {tokens}",
                used=used.tokens,
                estimate=tokens,
                **self._task(owner),
            )
        if budget.max_cost_usd is not None:
            if cost_usd is None:
                raise budget_exceeded(
                    BudgetLimit.MAX_COST_USD,
                    budget,
                    f"{self._whose(owner)}max_cost_usd (${format_usd(budget.max_cost_usd)}) "
                    "cannot be kept: the model of this call has no price",
                    used=format_usd(used.cost_usd),
                    **self._task(owner),
                )
            if cost_usd > left[BudgetLimit.MAX_COST_USD]:
                held = f", ${format_usd(held_cost)} held by calls under way" if held_cost else ""
                raise budget_exceeded(
                    BudgetLimit.MAX_COST_USD,
                    budget,
                    f"{self._whose(owner)}max_cost_usd (${format_usd(budget.max_cost_usd)}) "
                    f"would be crossed: ${format_usd(used.cost_usd)} spent"
                    f"{self._family(owner)}{held}, and this call may cost up to "
                    f"${format_usd(cost_usd)}",
                    used=format_usd(used.cost_usd),
                    estimate=format_usd(cost_usd),
                    **self._task(owner),
                )

    def _whose(self, owner: ReasoningChain) -> str:
        if owner is self._chain:
            return "budget "
        return f"the budget of task {owner.task_id} (which this sub-agent works for): "

    def _family(self, owner: ReasoningChain) -> str:
        return " by it and its sub-agents" if owner.running_children else ""

    def _task(self, owner: ReasoningChain) -> dict[str, Any]:
        return {} if owner is self._chain else {"task_id": owner.task_id}

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        self._give_back(call)
        chain = self._chain
        if chain.budget is None:
            return
        crossed = _crossed(chain.budget, chain.usage())
        if crossed is not None:
            limit, used = crossed
            raise budget_exceeded(
                limit,
                chain.budget,
                f"budget {limit} ({_shown(limit, getattr(chain.budget, limit))}) crossed by "
                f"the real usage of {call.definition.name}: {_shown(limit, used)}",
                used=_shown(limit, used),
            )

    def abandon(self, call: PendingCall) -> None:
        self._give_back(call)

    def _give_back(self, call: PendingCall) -> None:
        held = self._held.pop(call.call_step.id, None)
        if held is not None:
            self._chain.release(*held)


def _crossed(budget: Budget, used: Usage) -> tuple[BudgetLimit, Any] | None:
    for limit in (BudgetLimit.MAX_COST_USD, BudgetLimit.MAX_TOKENS):
        value = getattr(budget, limit)
        if value is not None and used.of(limit) > value:
            return limit, used.of(limit)
    return None


def _shown(limit: BudgetLimit, value: Any) -> Any:
    return f"${format_usd(value)}" if limit is BudgetLimit.MAX_COST_USD else value
