"""The typed event union of a task's stream; each `type` tag is an SSE `event:` name."""

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from app.chain.budget import Budget, BudgetLimit
from app.chain.enums import ErrorCode, TaskState, ToolType, VisibilityLevel
from app.chain.models import ChainMetrics, ReasoningStep, StopReason, utc_now


def _unset(value: object) -> bool:
    return value is None


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    chain_id: UUID
    timestamp: AwareDatetime = Field(default_factory=utc_now)
    # Set only where a sub-agent's event is relayed into an ancestor's stream.
    depth: int | None = Field(
        default=None,
        ge=1,
        exclude_if=_unset,
        description="On a sub-agent's event in an ancestor task's stream: the sub-agent's "
        "depth below the family's first task (its `task_id` and `chain_id` are the "
        "sub-agent's). Absent on the task's own events.",
    )
    parent_step_id: UUID | None = Field(
        default=None,
        exclude_if=_unset,
        description="On a sub-agent's event in an ancestor task's stream: the call step, in "
        "the chain one level up, that started the sub-agent.",
    )


class ChainStartedEvent(_Event):
    type: Literal["chain_started"] = "chain_started"


class TaskStatusEvent(_Event):
    type: Literal["task_status"] = "task_status"
    state: TaskState
    # Set on the first event of a run resumed after the process running it stopped: the
    # steps before it were stored then and are not made again.
    resumed: bool | None = None


class ReasoningStepEvent(_Event):
    """A step as it was added, with the chain's running totals at that moment."""

    type: Literal["reasoning_step"] = "reasoning_step"
    step: ReasoningStep
    metrics: ChainMetrics


class BudgetWarningEvent(_Event):
    """Sent once per run, when any budget is 80 % used: which ones, the budget, and what is
    left (also in `metrics.remaining_budget`)."""

    type: Literal["budget_warning"] = "budget_warning"
    limits: list[BudgetLimit]
    budget: Budget
    metrics: ChainMetrics


class ToolProgressEvent(_Event):
    """A tool's report on a call under way (`context.progress`): `step_id` is the call's
    `tool_call` step, `message` what it is doing, `fraction` how much is done (0 to 1) when the
    tool knows. Stored and numbered like every event, after the call's step and before its
    result; a reader sees it as it sees that step (`visibility`): not at all where the step is
    hidden, without its message where only a summary is shown."""

    type: Literal["tool_progress"] = "tool_progress"
    step_id: UUID
    tool_name: str
    tool_type: ToolType
    visibility: VisibilityLevel
    message: str | None
    fraction: float | None = Field(default=None, ge=0, le=1)


class ApprovalRequiredEvent(_Event):
    """A call waits for a human's decision (`POST /tasks/{id}/approvals/{approval_id}`): the
    run stops here and the task is `input_required` until the last such call of its batch is
    decided. A reader sees it as it sees the call's step (`visibility`): not at all where the
    step is hidden, without its arguments where only a summary is shown."""

    type: Literal["approval_required"] = "approval_required"
    approval_id: UUID
    step_id: UUID
    tool_name: str
    tool_type: ToolType
    visibility: VisibilityLevel
    arguments: dict[str, Any] | None
    expires_at: AwareDatetime
    note: str | None = None


class ApprovalDecidedEvent(_Event):
    """What was decided for a call that waited, as its resumed run acts on it: `arguments`
    are the reviewer's edited ones (None: the model's)."""

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


class ChainCompletedEvent(_Event):
    """The chain ended with an answer: `answer` is its conclusion (the last synthesis step),
    None for an agent that concluded without one; `output` the answer as JSON, for an agent
    with a `response_format`. With a `stop_reason` the task is `incomplete`: that limit
    stopped the run, and the answer is what the agent had by then."""

    type: Literal["chain_completed"] = "chain_completed"
    answer: str | None = None
    output: Any = None
    stop_reason: StopReason | None = None
    metrics: ChainMetrics


class ChainFailedEvent(_Event):
    """The chain ended without an answer; `details` say more where the code alone does not
    (which limit was crossed, when it resets...)."""

    type: Literal["chain_failed"] = "chain_failed"
    error_code: ErrorCode
    error_message: str
    details: dict[str, Any] = Field(default_factory=dict)
    metrics: ChainMetrics


class DoneEvent(_Event):
    """Always the last event of a stream."""

    type: Literal["done"] = "done"
    final_state: TaskState


class OutputDeltaEvent(_Event):
    """A piece of an LLM call's reply while the call runs, for a task submitted with
    `stream_output`: `delta` is the text, `kind` says whether of the answer (`content`) or of
    the model's reasoning (`reasoning`, where the provider streams it apart). `step_id` is the
    call's `tool_call` step; `correlation_id` ties it to the `tool_result` step that completes
    the call and holds the whole text. A call retried after its stream broke off streams
    again from the start with the next `attempt`.

    Live only: sent without an SSE `id:`, never stored and never replayed; it comes after
    the call's step and before the step that completes it.
    """

    type: Literal["output_delta"] = "output_delta"
    step_id: UUID
    correlation_id: UUID
    attempt: int = Field(ge=1)
    kind: Literal["content", "reasoning"]
    delta: str


ChainEvent = Annotated[
    ChainStartedEvent
    | TaskStatusEvent
    | ReasoningStepEvent
    | BudgetWarningEvent
    | ToolProgressEvent
    | ApprovalRequiredEvent
    | ApprovalDecidedEvent
    | ChainCompletedEvent
    | ChainFailedEvent
    | DoneEvent,
    Field(discriminator="type"),
]

chain_event_adapter: TypeAdapter[ChainEvent] = TypeAdapter(ChainEvent)
