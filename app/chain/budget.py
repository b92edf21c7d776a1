"""Hard budgets of one task, and what of them remains after each step."""

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from app.chain.money import USD

WARNING_RATIO = Decimal("0.8")
"""A `budget_warning` fires once, when any budget is this far used."""


class BudgetLimit(StrEnum):
    """The budgets a task can have; each is also the name a stop reports."""

    MAX_COST_USD = "max_cost_usd"
    MAX_TOKENS = "max_tokens"
    MAX_LLM_CALLS = "max_llm_calls"
    MAX_STEPS = "max_steps"
    MAX_DURATION_S = "max_duration_s"
    MAX_SANDBOX_S = "max_sandbox_s"


class Budget(BaseModel):
    """Hard limits of one task; a run that would cross one ends `budget_exceeded`. Unset
    fields do not limit."""

    model_config = ConfigDict(extra="forbid")

    max_cost_usd: USD | None = Field(default=None, gt=0, max_digits=24, decimal_places=12)
    max_tokens: int | None = Field(default=None, gt=0)
    max_llm_calls: int | None = Field(default=None, gt=0)
    max_steps: int | None = Field(default=None, gt=0)
    max_duration_s: float | None = Field(default=None, gt=0, le=86_400)
    # CPU seconds of its sandbox calls: a call once they are used up is refused.
    max_sandbox_s: float | None = Field(
        default=None, gt=0, le=86_400, exclude_if=lambda value: value is None
    )

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in BudgetLimit)

    def over(self, defaults: "Budget | None") -> "Budget":
        """This budget with `defaults` filling the limits it leaves unset."""
        if defaults is None:
            return self
        return Budget(
            **{name: getattr(self, name) or getattr(defaults, name) for name in BudgetLimit}
        )


class RemainingBudget(BaseModel):
    """What is left of each budget the task has (None: that budget is not set). Never
    negative: a budget crossed by a call's real usage shows 0."""

    model_config = ConfigDict(extra="forbid")

    cost_usd: USD | None = None
    tokens: int | None = None
    llm_calls: int | None = None
    steps: int | None = None
    duration_s: float | None = None
    sandbox_s: float | None = Field(default=None, exclude_if=lambda value: value is None)


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run has used so far, in the units of its budgets."""

    cost_usd: Decimal
    tokens: int
    llm_calls: int
    steps: int
    duration_s: float
    sandbox_s: float = 0.0

    def of(self, limit: BudgetLimit) -> Decimal | int | float:
        values: dict[BudgetLimit, Decimal | int | float] = {
            BudgetLimit.MAX_COST_USD: self.cost_usd,
            BudgetLimit.MAX_TOKENS: self.tokens,
            BudgetLimit.MAX_LLM_CALLS: self.llm_calls,
            BudgetLimit.MAX_STEPS: self.steps,
            BudgetLimit.MAX_DURATION_S: self.duration_s,
            BudgetLimit.MAX_SANDBOX_S: self.sandbox_s,
        }
        return values[limit]


def remaining(budget: Budget, used: Usage) -> RemainingBudget:
    def left(limit: int | None, value: int) -> int | None:
        return None if limit is None else max(limit - value, 0)

    return RemainingBudget(
        cost_usd=None
        if budget.max_cost_usd is None
        else max(budget.max_cost_usd - used.cost_usd, Decimal(0)),
        tokens=left(budget.max_tokens, used.tokens),
        llm_calls=left(budget.max_llm_calls, used.llm_calls),
        steps=left(budget.max_steps, used.steps),
        duration_s=None
        if budget.max_duration_s is None
        else round(max(budget.max_duration_s - used.duration_s, 0.0), 3),
        sandbox_s=None
        if budget.max_sandbox_s is None
        else round(max(budget.max_sandbox_s - used.sandbox_s, 0.0), 3),
    )


def nearly_used(budget: Budget, used: Usage) -> list[BudgetLimit]:
    """The budgets at least WARNING_RATIO used (duration is watched by a timer instead)."""
    return [
        limit
        for limit in BudgetLimit
        if limit is not BudgetLimit.MAX_DURATION_S
        and (value := getattr(budget, limit)) is not None
        and Decimal(str(used.of(limit))) >= WARNING_RATIO * Decimal(str(value))
    ]
