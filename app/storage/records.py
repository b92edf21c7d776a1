"""What the repositories hand back: plain typed records, no SQLAlchemy rows."""

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from app.chain import ChainMetrics, ChainStatus, ErrorCode, TaskState


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class TaskRecord(_Record):
    id: UUID
    tenant_id: str
    user_id: str
    status: TaskState
    chain_id: UUID
    model: str
    request: dict[str, Any]
    final_answer: str | None
    error_code: ErrorCode | None
    error_message: str | None
    last_seq: int
    usage: ChainMetrics
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def is_finished(self) -> bool:
        return self.status.is_terminal


class ChainRecord(_Record):
    id: UUID
    task_id: UUID
    tenant_id: str
    agent_id: str
    parent_chain_id: UUID | None
    status: ChainStatus
    metrics: ChainMetrics
    error_code: ErrorCode | None
    error_message: str | None
    started_at: datetime
    completed_at: datetime | None


class StoredEvent(_Record):
    """One event of a task's stream as stored: `data` is the SSE `data:` JSON text."""

    seq: int
    type: str
    data: str


class StoredStep(_Record):
    """A stored step as a stream event: the step's and the running metrics' JSON text."""

    seq: int
    timestamp: datetime
    step: str
    metrics: str
