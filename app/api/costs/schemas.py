"""Usage and cost reports as clients see them (JSON, or CSV with the same figures)."""

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.chain import USD, format_usd
from app.governance.costs import CostOrder, GroupBy, Totals
from app.storage.records import CostRecordRow


class Figures(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: USD = Field(description="Priced calls only; exact decimal, as a string.")
    unpriced_calls: int = Field(description="Calls of models without a price (cost unknown).")
    sandbox_s: USD = Field(
        default=Decimal(0),
        description="CPU seconds of sandbox calls (their cost is in `cost_usd`); exact "
        "decimal, as a string.",
    )

    @classmethod
    def of(cls, totals: Totals) -> "Figures":
        return cls.model_validate(totals)


class CostGroup(Figures):
    key: str | None = Field(
        description="The model, day, tool, task, user, agent or strategy; null: none (a task "
        "without an agent, a call without a user or strategy)."
    )
    split: str | None = Field(
        default=None, description="The `split_by` value within `key`; null without `split_by`."
    )


class CostReport(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: datetime = Field(alias="from")
    to: datetime
    group_by: GroupBy | None
    split_by: GroupBy | None = None
    order: CostOrder = "key"
    currency: Literal["USD"] = "USD"
    groups: list[CostGroup]
    totals: Figures
    truncated: bool = Field(description="More groups than `limit`; totals count them all.")


class UsageDay(Figures):
    day: date
    model: str


class UsageModel(Figures):
    model: str


class UsageReport(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: date = Field(alias="from")
    to: date
    currency: Literal["USD"] = "USD"
    days: list[UsageDay]
    models: list[UsageModel]
    totals: Figures


class TaskCost(BaseModel):
    task_id: UUID = Field(
        description="The task that made the call: this one, or a sub-agent's task under it."
    )
    step_id: UUID
    tool_name: str
    tool_type: str
    model: str | None
    deployment: str | None
    provider: str | None
    user_id: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: USD | None
    unpriced: bool
    recorded_at: datetime
    strategy: str | None = Field(
        default=None,
        description="The strategy (agent kind) that made the call: `react`, `plan`, or for "
        "an `auto` task `auto` (its assessment) and the strategies it ran; null for calls "
        "recorded before strategies were.",
    )
    sandbox_s: USD | None = Field(
        default=None, description="CPU seconds of a sandbox call; null for other calls."
    )

    @classmethod
    def of(cls, record: CostRecordRow) -> "TaskCost":
        return cls.model_validate(record, from_attributes=True)


class TaskCosts(BaseModel):
    task_id: UUID
    currency: Literal["USD"] = "USD"
    items: list[TaskCost]
    totals: Figures


FIGURES = ["calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls", "sandbox_s"]
# A spreadsheet reads a cell starting with one of these as a formula (OWASP, CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format_usd(value)
    if isinstance(value, int | float):
        return str(value)  # a figure of ours, kept a number even when negative
    if isinstance(value, datetime | date):
        return value.isoformat()
    text = str(value)
    # Text comes from users, tenants and models (user ids, model and tool names): a leading
    # quote makes a spreadsheet show it as text instead of running it.
    return f"'{text}" if text.startswith(_FORMULA_STARTS) else text


def to_csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A header row, then the rows; money as plain decimals, empty cells for nulls, and text
    that a spreadsheet would take for a formula (starting with `=`, `+`, `-`, `@`, a tab or a
    carriage return) prefixed with `'`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(value) for value in row])
    return out.getvalue()


def figures_of(item: BaseModel) -> list[object]:
    return [getattr(item, name) for name in FIGURES]
