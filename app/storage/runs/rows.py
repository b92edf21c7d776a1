"""The rows a run writes, each shape declared once: the typed rows below name a table's columns
(a test holds them to the tables), and the Postgres group write takes its column types from
the tables themselves."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, TypedDict
from uuid import UUID

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql

from app.chain import TaskState
from app.storage.types import RawJSON

UNFINISHED = [state for state in TaskState if not state.is_terminal]
# What counts against a tenant's `concurrent_runs`: a task waiting for a human does not.
RUNNING = [state for state in UNFINISHED if state is not TaskState.INPUT_REQUIRED]


@dataclass(frozen=True, slots=True)
class Fence:
    """A run's hold on its task: the runner that claimed it and the epoch of that claim (every
    claim of a task takes the next epoch). Every write of the run is conditional on both at
    the database, so a run that lost its task (its runner's lease lapsed and another runner
    claimed it, or it went back to the queue) can never write over its successor."""

    runner_id: str
    epoch: int


class StepRow(TypedDict):
    """A `reasoning_steps` row."""

    chain_id: UUID
    step_number: int
    id: UUID
    tenant_id: str
    seq: int
    type: str
    tool_type: str | None
    tool_name: str | None
    visibility: str
    timestamp: datetime
    data: RawJSON
    metrics: RawJSON


class EventRow(TypedDict):
    """A `task_events` row: a stored event of a stream that is not a step."""

    task_id: UUID
    seq: int
    tenant_id: str
    type: str
    data: RawJSON


class CostRow(TypedDict):
    """A `cost_records` row (its id is the database's)."""

    tenant_id: str
    user_id: str | None
    task_id: UUID
    chain_id: UUID
    step_id: UUID
    correlation_id: UUID
    tool_name: str
    tool_type: str
    model: str | None
    deployment: str | None
    provider: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    unpriced: bool
    recorded_at: datetime
    strategy: str | None
    sandbox_s: Decimal | None


class AuditRow(TypedDict):
    """An `audit_events` row (its id is the database's)."""

    tenant_id: str
    actor: str
    action: str
    resource_type: str
    resource_id: str | None
    details: dict[str, Any]
    created_at: datetime


RUN_TASK_COLUMNS = (
    "last_seq",
    "status",
    "started_at",
    "final_answer",
    "error_code",
    "error_message",
    "finished_at",
    "output",
    "stop_reason",
    "replay_report",
)
"""The columns of `tasks` a run's writes change."""

RUN_CHAIN_COLUMNS = ("status", "metrics", "error_code", "error_message", "completed_at")
"""The columns of `reasoning_chains` a run's writes change."""


@dataclass(slots=True)
class RunWrite:
    """Everything one batch of a run's events changes, written in one transaction, on the
    condition that the run still holds its task (`fence`) and that the task's stored events
    end at `after_seq` (so a write retried after a commit whose answer was lost is known to
    be stored already, and never stored twice)."""

    task_id: UUID
    chain_id: UUID
    fence: Fence
    after_seq: int
    last_seq: int
    steps: list[StepRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    costs: list[CostRow] = field(default_factory=list)
    audits: list[AuditRow] = field(default_factory=list)
    # Columns of RUN_TASK_COLUMNS and RUN_CHAIN_COLUMNS the batch sets.
    task_changes: dict[str, Any] = field(default_factory=dict)
    chain_changes: dict[str, Any] = field(default_factory=dict)
    # Webhook deliveries (the outbox) of the changes this batch makes.
    deliveries: list[dict[str, Any]] = field(default_factory=list)


def postgres_types(table: Table, names: Iterable[str] | None = None) -> dict[str, str]:
    """The Postgres types of a table's columns (all but a database-made id, or `names`), as
    `jsonb_to_recordset` declares them."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    if names is None:
        columns = [c for c in table.columns if not (c.primary_key and c.autoincrement is True)]
    else:
        columns = [table.c[name] for name in names]
    return {column.name: column.type.compile(dialect=dialect) for column in columns}
