"""ReasoningChain and ReasoningStep: the record of everything an agent did for a task."""

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal, Self
from uuid import UUID, uuid4

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from app.chain.budget import Budget, RemainingBudget, Usage, remaining
from app.chain.enums import ChainStatus, ErrorCode, StepType, ToolType, VisibilityLevel
from app.chain.money import USD


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FailedAttempt(_Model):
    """One attempt of a tool call that failed before the call's final outcome.

    `attempt` is the executor's attempt number (retries); several failed attempts may share
    one number when the LLM router fell back across deployments inside that attempt.
    """

    attempt: int = Field(ge=1)
    error_class: str
    message: str
    deployment: str | None = None
    model: str | None = None
    status_code: int | None = None
    backoff_s: float | None = None


class ToolCallInfo(_Model):
    """A tool call as the agent asked for it.

    An LLM call that continues the conversation of an earlier one records only what is new:
    `arguments["messages"]` holds the messages added since, and `arguments["history"]` =
    `{"step": n, "messages": k}` says the conversation starts with the first k messages of the
    LLM call at step n (`ReasoningChain.llm_messages` expands it). A chain's size then grows
    with its conversation, not with its square.
    """

    tool_type: ToolType
    tool_name: str = Field(min_length=1, max_length=255)
    arguments: dict[str, Any] = Field(default_factory=dict)
    correlation_id: UUID = Field(default_factory=uuid4)
    # LLM calls only
    model: str | None = None
    provider: str | None = None
    prompt_tokens_estimate: int | None = None


class ToolResultInfo(_Model):
    """The outcome of a tool call. `result` may be truncated (see `truncated`). It names its
    call's tool (and, for an LLM call, the model asked for when no reply names one), so what
    is derived from a result (costs, metrics, audit, the step's facts) needs nothing else;
    results stored before they did leave them None."""

    correlation_id: UUID
    tool_type: ToolType | None = None
    tool_name: str | None = Field(default=None, max_length=255)
    success: bool
    result: Any = None
    error: str | None = None
    error_code: ErrorCode | None = None
    duration_ms: float = Field(ge=0)
    attempts: int = Field(default=1, ge=0)
    failed_attempts: list[FailedAttempt] = Field(default_factory=list)
    truncated: bool = False
    original_chars: int | None = None
    # usage: LLM calls and any tool that reports it
    model: str | None = None
    provider: str | None = None
    deployment: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: USD | None = None
    unpriced: bool = False
    cached: bool = False


class ThinkingInfo(_Model):
    thought: str
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


StopReason = Literal["max_iterations", "max_cost_usd", "max_tokens", "max_llm_calls"]
"""The limits an agent with `on_limit: answer` answers at instead of failing."""


class SynthesisInfo(_Model):
    """A conclusion and the steps it rests on. `output` is the conclusion as JSON, when the
    agent has a `response_format` and the conclusion matches it. `stop_reason` says that a
    limit stopped the run and this is what it answered from what it had."""

    conclusion: str
    sources: list[UUID] = Field(default_factory=list)
    output: Any = None
    stop_reason: StopReason | None = None


class VisibilityConfig(_Model):
    level: VisibilityLevel = VisibilityLevel.FULL
    summary: str | None = None


_PAYLOAD_BY_TYPE = {
    StepType.THINKING: "thinking",
    StepType.TOOL_CALL: "tool_call",
    StepType.TOOL_RESULT: "tool_result",
    StepType.SYNTHESIS: "synthesis",
}


class ReasoningStep(_Model):
    """One step of a chain; exactly the payload matching `type` is set."""

    id: UUID = Field(default_factory=uuid4)
    step_number: int = Field(default=0, ge=0, description="Assigned by the chain, from 1.")
    type: StepType
    timestamp: AwareDatetime = Field(default_factory=utc_now)
    thinking: ThinkingInfo | None = None
    tool_call: ToolCallInfo | None = None
    tool_result: ToolResultInfo | None = None
    synthesis: SynthesisInfo | None = None
    visibility: VisibilityConfig = Field(default_factory=VisibilityConfig)
    parent_step_id: UUID | None = None

    @model_validator(mode="after")
    def _payload_matches_type(self) -> Self:
        expected = _PAYLOAD_BY_TYPE[self.type]
        for name in _PAYLOAD_BY_TYPE.values():
            present = getattr(self, name) is not None
            if present != (name == expected):
                raise ValueError(f"a {self.type} step must carry exactly the `{expected}` payload")
        return self


class ChainMetrics(_Model):
    """Running totals of a chain, updated as each step is added.

    `tool_calls` counts every tool call, LLM calls included; `llm_calls` counts those alone.
    `total_cost_usd` sums priced calls only; `unpriced_calls` says how many had no price.
    """

    total_steps: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    failed_tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    total_cost_usd: USD = Decimal(0)
    unpriced_calls: int = 0
    total_duration_ms: float = 0.0
    # Set when the task has a budget: what is left of it right after this step.
    remaining_budget: RemainingBudget | None = None

    def record(self, step: ReasoningStep) -> None:
        self.total_steps += 1
        if step.tool_call is not None:
            self.tool_calls += 1
            if step.tool_call.tool_type is ToolType.LLM:
                self.llm_calls += 1
        result = step.tool_result
        if result is None:
            return
        self.total_duration_ms += result.duration_ms
        if not result.success:
            self.failed_tool_calls += 1
        self.input_tokens += result.input_tokens or 0
        self.output_tokens += result.output_tokens or 0
        self.total_tokens += result.total_tokens or 0
        if result.cost_usd is not None:
            self.total_cost_usd += result.cost_usd
        if result.unpriced:
            self.unpriced_calls += 1


StepListener = Callable[[ReasoningStep], None]


class ReasoningChain(_Model):
    """The complete, ordered record of a task's reasoning.

    `add_step` numbers the step, updates the metrics and hands the step synchronously to every
    listener, so consumers (event channels, stores) see it the moment it exists.
    """

    id: UUID = Field(default_factory=uuid4)
    task_id: str = Field(min_length=1, max_length=255)
    agent_id: str = Field(min_length=1, max_length=255)
    tenant_id: str | None = None
    status: ChainStatus = ChainStatus.INITIALIZING
    started_at: AwareDatetime = Field(default_factory=utc_now)
    completed_at: AwareDatetime | None = None
    steps: list[ReasoningStep] = Field(default_factory=list)
    metrics: ChainMetrics = Field(default_factory=ChainMetrics)
    child_chain_ids: list[UUID] = Field(default_factory=list)
    error_code: ErrorCode | None = None
    error_message: str | None = None
    # The task's hard limits; the metrics then carry what remains of them.
    budget: Budget | None = None

    _listeners: list[StepListener] = PrivateAttr(default_factory=list)
    # The stored steps a resumed run replays (see `replay`).
    _journal: list["ReasoningStep"] = PrivateAttr(default_factory=list)
    _results: dict[UUID, "ReasoningStep"] = PrivateAttr(default_factory=dict)

    def replay(self, steps: list["ReasoningStep"]) -> None:
        """Makes this (empty) chain replay `steps`, the stored steps of an earlier run of the
        same task: the steps the agent adds are matched against them in order and, where they
        match, the stored step takes their place (same id, numbers and results) without
        reaching the listeners, since it is stored and streamed already. A step that does not
        match raises `ChainDiverged`. Past the last stored step the chain is live again."""
        if self.steps:
            raise ValueError("only an empty chain replays")
        self._journal = list(steps)
        self._results = {
            step.tool_result.correlation_id: step for step in steps if step.tool_result is not None
        }

    @property
    def replaying(self) -> bool:
        return len(self.steps) < len(self._journal)

    def recorded_result(self, call: "ReasoningStep") -> "ReasoningStep | None":
        """The stored result step of a replayed call step, if its result was stored."""
        if call.tool_call is None:
            return None
        return self._results.get(call.tool_call.correlation_id)

    def add_listener(self, listener: StepListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: StepListener) -> None:
        self._listeners.remove(listener)

    def add_step(self, step: ReasoningStep) -> ReasoningStep:
        if self.status.is_terminal:
            raise ValueError(f"chain {self.id} is {self.status}; it takes no more steps")
        if self.replaying:
            return self._replayed(step)
        step.step_number = len(self.steps) + 1
        self.steps.append(step)
        self.metrics.record(step)
        if self.budget is not None:
            self.metrics.remaining_budget = remaining(self.budget, self.usage())
        for listener in self._listeners:
            listener(step)
        return step

    def _replayed(self, step: ReasoningStep) -> ReasoningStep:
        recorded = self._journal[len(self.steps)]
        if not _same_step(step, recorded):
            raise ChainDiverged(recorded, step)
        self.steps.append(recorded)
        self.metrics.record(recorded)
        if self.budget is not None:
            self.metrics.remaining_budget = remaining(self.budget, self.usage())
        return recorded

    def usage(self) -> Usage:
        """What the chain has used so far, in the units of budgets."""
        metrics = self.metrics
        return Usage(
            cost_usd=metrics.total_cost_usd,
            tokens=metrics.total_tokens,
            llm_calls=metrics.llm_calls,
            steps=metrics.total_steps,
            duration_s=(utc_now() - self.started_at).total_seconds(),
        )

    def finish(
        self,
        status: ChainStatus,
        error_code: ErrorCode | None = None,
        error_message: str | None = None,
    ) -> None:
        if not status.is_terminal:
            raise ValueError(f"{status} is not a terminal chain status")
        self.status = status
        self.error_code = error_code
        self.error_message = error_message
        self.completed_at = utc_now()

    def llm_messages(self, step: ReasoningStep) -> list[dict[str, Any]]:
        """The full conversation an LLM tool_call step sent, its history references expanded."""
        if step.tool_call is None:
            raise ValueError(f"step {step.step_number} is not a tool call")
        arguments = step.tool_call.arguments
        messages: list[dict[str, Any]] = list(arguments.get("messages", []))
        history = arguments.get("history")
        if history is None:
            return messages
        earlier = self.steps[history["step"] - 1]
        return self.llm_messages(earlier)[: history["messages"]] + messages

    def step_by_correlation_id(self, correlation_id: UUID) -> ReasoningStep | None:
        """The tool_call step of a correlation id (looked for from the last step back: the
        call of a result being recorded is near the end)."""
        for step in reversed(self.steps):
            if step.tool_call is not None and step.tool_call.correlation_id == correlation_id:
                return step
        return None


class ChainDiverged(Exception):
    """A resumed run did not do what its stored chain says it did: it cannot go on from it."""

    def __init__(self, recorded: ReasoningStep, step: ReasoningStep) -> None:
        super().__init__(
            f"the resumed run did not repeat step {recorded.step_number}: it was "
            f"{_describe(recorded)}, the run now made {_describe(step)}"
        )
        self.step_number = recorded.step_number


def _describe(step: ReasoningStep) -> str:
    if step.tool_call is not None:
        return f"a call of {step.tool_call.tool_name!r}"
    return f"a {step.type} step"


def _same_step(step: ReasoningStep, recorded: ReasoningStep) -> bool:
    """Whether a step of a resumed run is the stored one again: its kind and what it says
    (an LLM call's arguments are recorded compacted, so its tool alone is compared)."""
    if step.type != recorded.type:
        return False
    if step.tool_call is not None and recorded.tool_call is not None:
        call, stored = step.tool_call, recorded.tool_call
        if call.tool_name != stored.tool_name:
            return False
        return call.tool_type is ToolType.LLM or call.arguments == stored.arguments
    if step.tool_result is not None and recorded.tool_result is not None:
        return step.tool_result.correlation_id == recorded.tool_result.correlation_id
    if step.thinking is not None and recorded.thinking is not None:
        return step.thinking.thought == recorded.thinking.thought
    if step.synthesis is not None and recorded.synthesis is not None:
        return step.synthesis.conclusion == recorded.synthesis.conclusion
    return False
