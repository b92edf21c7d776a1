"""Cost records: every call that reports usage is handed to a `CostRecorder`."""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Protocol
from uuid import UUID

from app.chain import ToolType
from app.chain.models import utc_now


@dataclass(frozen=True, slots=True)
class CostRecord:
    """Usage and cost of one tool call; `cost_usd` is None (and `unpriced` set) when the
    model's price is unknown."""

    task_id: str
    chain_id: UUID
    step_id: UUID
    correlation_id: UUID
    tool_name: str
    tool_type: ToolType
    tenant_id: str | None
    user_id: str | None
    model: str | None
    deployment: str | None
    provider: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    unpriced: bool
    recorded_at: datetime = field(default_factory=utc_now)
    # The strategy that made the call (`ToolCallContext.strategy`).
    strategy: str | None = None
    # CPU seconds of a sandbox call.
    sandbox_s: Decimal | None = None


class CostRecorder(Protocol):
    async def record_cost(self, record: CostRecord) -> None: ...


class InMemoryCostRecorder:
    """Keeps records in a list: for one process's runs (the CLI) and for tests."""

    def __init__(self) -> None:
        self.records: list[CostRecord] = []

    async def record_cost(self, record: CostRecord) -> None:
        self.records.append(record)

    def total_usd(self) -> Decimal:
        return sum((r.cost_usd for r in self.records if r.cost_usd is not None), Decimal(0))
