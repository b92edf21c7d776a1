"""The typed event union of a task's stream; each `type` tag is an SSE `event:` name."""

from typing import Annotated, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from app.chain.enums import ErrorCode, TaskState
from app.chain.models import ChainMetrics, ReasoningStep, utc_now


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    chain_id: UUID
    timestamp: AwareDatetime = Field(default_factory=utc_now)


class ChainStartedEvent(_Event):
    type: Literal["chain_started"] = "chain_started"


class TaskStatusEvent(_Event):
    type: Literal["task_status"] = "task_status"
    state: TaskState


class ReasoningStepEvent(_Event):
    """A step as it was added, with the chain's running totals at that moment."""

    type: Literal["reasoning_step"] = "reasoning_step"
    step: ReasoningStep
    metrics: ChainMetrics


class ChainCompletedEvent(_Event):
    type: Literal["chain_completed"] = "chain_completed"
    metrics: ChainMetrics


class ChainFailedEvent(_Event):
    type: Literal["chain_failed"] = "chain_failed"
    error_code: ErrorCode
    error_message: str
    metrics: ChainMetrics


class DoneEvent(_Event):
    """Always the last event of a stream."""

    type: Literal["done"] = "done"
    final_state: TaskState


ChainEvent = Annotated[
    ChainStartedEvent
    | TaskStatusEvent
    | ReasoningStepEvent
    | ChainCompletedEvent
    | ChainFailedEvent
    | DoneEvent,
    Field(discriminator="type"),
]

chain_event_adapter: TypeAdapter[ChainEvent] = TypeAdapter(ChainEvent)
