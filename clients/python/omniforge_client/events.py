"""The events of a task's stream, one model per SSE `event:` name, discriminated by `type`.

Stored events carry the stream's `event_id` (gap-free, except for steps the reader may not
see); live `output_delta` events have none. An event type this client does not know arrives
as an `UnknownEvent` rather than breaking the stream."""

import json
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter

from omniforge_client.models import (
    ApiModel,
    Budget,
    ChainMetrics,
    ErrorCode,
    Step,
    StopReason,
    TaskState,
    ToolType,
    VisibilityLevel,
)


class _Identified(BaseModel):
    _event_id: int | None = PrivateAttr(default=None)

    @property
    def event_id(self) -> int | None:
        """The SSE `id:` of this event (None for live-only events)."""
        return self._event_id


class Event(_Identified, ApiModel):
    task_id: str
    chain_id: UUID
    timestamp: datetime
    # A sub-agent's event in an ancestor task's stream: its depth below the family's first
    # task and the call step that started it (`task_id`, `chain_id` are the sub-agent's).
    depth: int | None = None
    parent_step_id: UUID | None = None


class ChainStartedEvent(Event):
    api_schema = "ChainStartedEvent"
    type: Literal["chain_started"] = "chain_started"


class TaskStatusEvent(Event):
    api_schema = "TaskStatusEvent"
    type: Literal["task_status"] = "task_status"
    state: TaskState
    # True on the first event of a run resumed after the server running it stopped.
    resumed: bool | None = None


class ReasoningStepEvent(Event):
    """A step as it was added (as the reader may see it), with the chain's totals then."""

    api_schema = "ReasoningStepEvent"
    type: Literal["reasoning_step"] = "reasoning_step"
    step: Step
    metrics: ChainMetrics


class BudgetWarningEvent(Event):
    api_schema = "BudgetWarningEvent"
    type: Literal["budget_warning"] = "budget_warning"
    limits: list[str]
    budget: Budget
    metrics: ChainMetrics


class ToolProgressEvent(Event):
    api_schema = "ToolProgressEvent"
    type: Literal["tool_progress"] = "tool_progress"
    step_id: UUID
    tool_name: str
    tool_type: ToolType
    visibility: VisibilityLevel
    message: str | None
    fraction: float | None = None


class ApprovalRequiredEvent(Event):
    """A tool call waits for a human's decision; the task is `input_required` meanwhile.
    `arguments` are None where the reader may not see the call's."""

    api_schema = "ApprovalRequiredEvent"
    type: Literal["approval_required"] = "approval_required"
    approval_id: UUID
    step_id: UUID
    tool_name: str
    tool_type: ToolType
    visibility: VisibilityLevel
    arguments: dict[str, Any] | None
    expires_at: datetime
    note: str | None = None


class ApprovalDecidedEvent(Event):
    """What was decided for a call that waited, as the resumed run acts on it."""

    api_schema = "ApprovalDecidedEvent"
    type: Literal["approval_decided"] = "approval_decided"
    approval_id: UUID
    step_id: UUID
    tool_name: str
    tool_type: ToolType
    visibility: VisibilityLevel
    decision: Literal["approved", "denied", "expired"]
    decided_by: str | None = None
    reason: str | None = None
    arguments: dict[str, Any] | None = None


class ChainCompletedEvent(Event):
    api_schema = "ChainCompletedEvent"
    type: Literal["chain_completed"] = "chain_completed"
    answer: str | None = None
    output: Any = None
    stop_reason: StopReason | None = None
    metrics: ChainMetrics


class ChainFailedEvent(Event):
    api_schema = "ChainFailedEvent"
    type: Literal["chain_failed"] = "chain_failed"
    error_code: ErrorCode
    error_message: str
    details: dict[str, Any] = Field(default_factory=dict)
    metrics: ChainMetrics


class DoneEvent(Event):
    """Always the last event of a stream."""

    api_schema = "DoneEvent"
    type: Literal["done"] = "done"
    final_state: TaskState


class OutputDeltaEvent(Event):
    """A piece of an LLM call's reply while it runs (tasks with `stream_output`): live only,
    never replayed after a reconnect."""

    api_schema = "OutputDeltaEvent"
    type: Literal["output_delta"] = "output_delta"
    step_id: UUID
    correlation_id: UUID
    attempt: int
    kind: Literal["content", "reasoning"]
    delta: str


class UnknownEvent(_Identified):
    """An event type this client does not know: its SSE name and its data as sent (parsed
    JSON where it is JSON)."""

    type: str
    data: Any


KnownEvent = Annotated[
    ChainStartedEvent
    | TaskStatusEvent
    | ReasoningStepEvent
    | BudgetWarningEvent
    | ToolProgressEvent
    | ApprovalRequiredEvent
    | ApprovalDecidedEvent
    | ChainCompletedEvent
    | ChainFailedEvent
    | DoneEvent
    | OutputDeltaEvent,
    Field(discriminator="type"),
]
StreamEvent = KnownEvent | UnknownEvent

_known: TypeAdapter[KnownEvent] = TypeAdapter(KnownEvent)
KNOWN_TYPES: frozenset[str] = frozenset(
    cls.model_fields["type"].default
    for cls in (
        ChainStartedEvent,
        TaskStatusEvent,
        ReasoningStepEvent,
        BudgetWarningEvent,
        ToolProgressEvent,
        ChainCompletedEvent,
        ChainFailedEvent,
        DoneEvent,
        OutputDeltaEvent,
    )
)


def parse_event(name: str, data: str, event_id: int | None) -> StreamEvent:
    """The typed event of one SSE message."""
    try:
        payload = json.loads(data)
    except ValueError:
        payload = data
    event: StreamEvent
    if name in KNOWN_TYPES and isinstance(payload, dict):
        event = _known.validate_python({**payload, "type": name})
    else:
        event = UnknownEvent(type=name, data=payload)
    event._event_id = event_id
    return event
