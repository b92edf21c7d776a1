"""ReasoningChain and ReasoningStep: the record of everything an agent did for a task."""

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal, NoReturn, Self
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from app.chain.budget import Budget, BudgetLimit, RemainingBudget, Usage, remaining
from app.chain.enums import (
    ChainStatus,
    ErrorCode,
    StepType,
    StrategyEvent,
    ToolType,
    VisibilityLevel,
)
from app.chain.money import USD
from app.chain.replay import ReplayMatch, ReplayReport, StepDifference, ended, step_difference
from app.errors import OmniForgeError
from app.ids import uuid4


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


DataLabel = Literal["untrusted", "private"]
"""What a tool result holds: text someone other than the run's user wrote (`untrusted`), data
that is not public (`private`); see `app.tools.dataflow`."""


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
    # CPU seconds a sandbox call used (read from the kernel's accounting of its sandbox).
    sandbox_s: float | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    # A sub-agent call's result: the task and chain it started. Its usage is that of the
    # child's whole family, recorded in their own cost records, and counts here only in the
    # metrics (never billed twice).
    child_task_id: UUID | None = Field(default=None, exclude_if=lambda value: value is None)
    child_chain_id: UUID | None = Field(default=None, exclude_if=lambda value: value is None)
    # The LLM calls the child's family made (sub-agent calls only): they count in this
    # chain's `llm_calls`, as its tokens and cost count in its totals.
    llm_calls: int | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    # What the result brought into the run's context (untrusted text, private data): a
    # resumed run reads them back to know what it held.
    labels: list[DataLabel] = Field(default_factory=list, exclude_if=lambda value: not value)


class ThinkingInfo(_Model):
    """A thought of the agent's. A strategy's records (a search tree's nodes and scores, a
    choice of strategy) name their `event` and carry its structured `detail`."""

    thought: str
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    # Absent from plain thoughts (nearly all).
    event: StrategyEvent | None = Field(default=None, exclude_if=lambda value: value is None)
    detail: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)


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
    copied_from: UUID | None = Field(
        default=None,
        # Absent from the steps of runs that copy nothing (nearly all).
        exclude_if=lambda value: value is None,
        description="The step of another chain this one repeats (a replay's steps, a fork's "
        "steps up to where it forks): no call was made for it, nothing was billed, and it "
        "does not count in this chain's usage.",
    )

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
    # CPU seconds of its sandbox calls.
    sandbox_s: float = Field(default=0.0, exclude_if=lambda value: not value)
    # Set when the task has a budget: what is left of it right after this step.
    remaining_budget: RemainingBudget | None = None

    def record(self, step: ReasoningStep) -> None:
        self.total_steps += 1
        if step.copied_from is not None:
            return  # a recorded step of another chain: nothing was used for it here
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
        self.llm_calls += result.llm_calls or 0
        self.input_tokens += result.input_tokens or 0
        self.output_tokens += result.output_tokens or 0
        self.total_tokens += result.total_tokens or 0
        if result.cost_usd is not None:
            self.total_cost_usd += result.cost_usd
        if result.unpriced:
            self.unpriced_calls += 1
        if result.sandbox_s:
            self.sandbox_s = round(self.sandbox_s + result.sandbox_s, 3)


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
    # Set when a run that replays a recording (`replay(..., then_live=False)`) ends.
    replay_report: ReplayReport | None = None

    _listeners: list[StepListener] = PrivateAttr(default_factory=list)
    # The steps a run replays (see `replay`): the first `_stored` of them are this chain's own.
    _journal: list["ReasoningStep"] = PrivateAttr(default_factory=list)
    _results: dict[UUID, "ReasoningStep"] = PrivateAttr(default_factory=dict)
    _stored: int = PrivateAttr(default=0)
    _match: ReplayMatch = PrivateAttr(default=ReplayMatch.ACTIONS)
    _then_live: bool = PrivateAttr(default=True)
    _divergence: StepDifference | None = PrivateAttr(default=None)
    # A family's live links: the chain whose call started this one, the sub-agents' chains
    # running for calls of this one (until each call's result, which carries the child's
    # usage, is added), and what calls under way in this chain and its descendants may use.
    _parent: "ReasoningChain | None" = PrivateAttr(default=None)
    _running: dict[UUID, "ReasoningChain"] = PrivateAttr(default_factory=dict)
    _reserved_cost: Decimal = PrivateAttr(default=Decimal(0))
    _reserved_tokens: int = PrivateAttr(default=0)

    def replay(
        self,
        steps: list["ReasoningStep"],
        *,
        stored: int | None = None,
        match: ReplayMatch = ReplayMatch.ACTIONS,
        then_live: bool = True,
    ) -> None:
        """Makes this (empty) chain replay `steps`: the steps the agent adds are matched
        against them in order and, where they match (as `match` says), the recorded step takes
        their place (same id, numbers and results); a step that does not match raises
        `ChainDiverged`. The first `stored` of them (default: all) are this chain's own stored
        steps, from an earlier run of the same task: they do not reach the listeners, since
        they are stored and streamed already. The others are another chain's, copied: they
        reach the listeners as new steps of this one. Past the last step the chain is live
        again, or with `then_live=False` (a replay, which makes no call) diverges."""
        if self.steps:
            raise ValueError("only an empty chain replays")
        self._journal = list(steps)
        self._results = {
            step.tool_result.correlation_id: step for step in steps if step.tool_result is not None
        }
        self._stored = len(steps) if stored is None else stored
        self._match = match
        self._then_live = then_live

    @property
    def replaying(self) -> bool:
        return len(self.steps) < len(self._journal)

    @property
    def resuming(self) -> bool:
        """Whether a run goes on from this chain's own stored steps (an earlier run's)."""
        return self.replaying and self._stored > 0

    @property
    def replays_recording(self) -> bool:
        """Whether it replays another chain's steps (a replay or a fork), not only its own."""
        return self._stored < len(self._journal)

    @property
    def makes_calls(self) -> bool:
        """False for a replay: every result comes from its recording."""
        return self._then_live

    def unreplayed(self) -> StepDifference | None:
        """When a run that replays another chain's steps ends before them all: where."""
        if not (self.replays_recording and self.replaying):
            return None
        return ended(len(self.steps) + 1, self._journal[len(self.steps)], None)

    def recorded_result(self, call: "ReasoningStep") -> "ReasoningStep | None":
        """The stored result step of a replayed call step, if its result was stored."""
        if call.tool_call is None:
            return None
        return self._results.get(call.tool_call.correlation_id)

    # --- a family (sub-agents) -----------------------------------------------------------

    def adopt(self, child: "ReasoningChain") -> None:
        """A sub-agent's chain running for a call of this one: until the result of that call
        (naming `child.id` as its `child_chain_id`) is added, the child's usage counts in this
        chain's `usage()`, and so in every ancestor's."""
        child._parent = self
        self._running[child.id] = child
        if child.id not in self.child_chain_ids:
            self.child_chain_ids.append(child.id)

    def disown(self, child_id: UUID) -> None:
        """A child chain whose call ended without a result that carries its usage."""
        self._running.pop(child_id, None)

    @property
    def running_children(self) -> bool:
        """Whether sub-agents' chains run for calls of this one."""
        return bool(self._running)

    @property
    def ancestors(self) -> list["ReasoningChain"]:
        """The chains above this one in its family, nearest first (live links only)."""
        chains, chain = [], self._parent
        while chain is not None:
            chains.append(chain)
            chain = chain._parent
        return chains

    def reserve(self, cost_usd: Decimal, tokens: int) -> None:
        """Holds what a call under way may use, here and in every ancestor, until `release`."""
        for chain in (self, *self.ancestors):
            chain._reserved_cost += cost_usd
            chain._reserved_tokens += tokens

    def release(self, cost_usd: Decimal, tokens: int) -> None:
        for chain in (self, *self.ancestors):
            chain._reserved_cost -= cost_usd
            chain._reserved_tokens -= tokens

    @property
    def reserved(self) -> tuple[Decimal, int]:
        """What calls under way in this chain and its descendants may still use (cost,
        tokens)."""
        return self._reserved_cost, self._reserved_tokens

    def left(self, used: Usage | None = None) -> dict[BudgetLimit, Any]:
        """What is left of each limit of its budget (absent where it sets none, or has no
        budget), counting what calls under way hold: its family's cost, tokens and LLM calls
        so far, its own time (`used`, when the caller has just read it)."""
        budget = self.budget
        if budget is None:
            return {}
        used = used or self.usage()
        held_cost, held_tokens = self.reserved
        left: dict[BudgetLimit, Any] = {}
        if budget.max_cost_usd is not None:
            left[BudgetLimit.MAX_COST_USD] = budget.max_cost_usd - used.cost_usd - held_cost
        if budget.max_tokens is not None:
            left[BudgetLimit.MAX_TOKENS] = budget.max_tokens - used.tokens - held_tokens
        if budget.max_llm_calls is not None:
            left[BudgetLimit.MAX_LLM_CALLS] = budget.max_llm_calls - used.llm_calls
        if budget.max_duration_s is not None:
            left[BudgetLimit.MAX_DURATION_S] = round(budget.max_duration_s - used.duration_s, 3)
        if budget.max_sandbox_s is not None:
            left[BudgetLimit.MAX_SANDBOX_S] = round(budget.max_sandbox_s - used.sandbox_s, 3)
        return left

    def add_listener(self, listener: StepListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: StepListener) -> None:
        self._listeners.remove(listener)

    def add_step(self, step: ReasoningStep) -> ReasoningStep:
        if self.status.is_terminal:
            raise ValueError(f"chain {self.id} is {self.status}; it takes no more steps")
        if self.replaying:
            return self._replayed(step)
        if not self._then_live:
            self._diverged(ended(len(self.steps) + 1, None, step))
        step.step_number = len(self.steps) + 1
        self.steps.append(step)
        self.metrics.record(step)
        if self._running and step.tool_result is not None:
            self._settled(step.tool_result)
        if self.budget is not None:
            self.metrics.remaining_budget = remaining(self.budget, self.usage())
        for listener in self._listeners:
            listener(step)
        return step

    def _replayed(self, step: ReasoningStep) -> ReasoningStep:
        index = len(self.steps)
        recorded = self._journal[index]
        difference = step_difference(step, recorded, self._match)
        if difference is not None:
            self._diverged(difference)
        copied = index >= self._stored
        if copied:
            # Another chain's step, new here: it happens now (a replayed result is added as
            # the recorded step itself).
            recorded.timestamp = utc_now() if step is recorded else step.timestamp
        self.steps.append(recorded)
        self.metrics.record(recorded)
        if self._running and recorded.tool_result is not None:
            self._settled(recorded.tool_result)
        if self.budget is not None:
            self.metrics.remaining_budget = remaining(self.budget, self.usage())
        if copied:
            for listener in self._listeners:
                listener(recorded)
        return recorded

    def _settled(self, result: ToolResultInfo) -> None:
        """A sub-agent call's result carries its child's usage: the child no longer counts
        live (in the same step, so nothing is counted twice or missed)."""
        if result.child_chain_id is not None:
            self._running.pop(result.child_chain_id, None)

    def _diverged(self, difference: StepDifference) -> NoReturn:
        self._divergence = difference
        raise ChainDiverged(difference, resumed=not self.replays_recording)

    def family_metrics(self) -> ChainMetrics:
        """The chain's totals with what its running sub-agents' chains have used so far
        (counted as `usage()` counts them): what its task has cost up to this moment."""
        if not self._running:
            return self.metrics
        metrics = self.metrics.model_copy()
        for child in self._running.values():
            used = child.family_metrics()
            metrics.llm_calls += used.llm_calls
            metrics.input_tokens += used.input_tokens
            metrics.output_tokens += used.output_tokens
            metrics.total_tokens += used.total_tokens
            metrics.total_cost_usd += used.total_cost_usd
            metrics.unpriced_calls += used.unpriced_calls
            metrics.sandbox_s = round(metrics.sandbox_s + used.sandbox_s, 3)
        if self.budget is not None:
            metrics.remaining_budget = remaining(self.budget, self.usage())
        return metrics

    def usage(self) -> Usage:
        """What the chain has used so far, in the units of budgets: cost, tokens and LLM calls
        of its sub-agents' chains included (those finished through their calls' results,
        those running live); steps and duration its own."""
        metrics = self.metrics
        cost, tokens, calls = metrics.total_cost_usd, metrics.total_tokens, metrics.llm_calls
        sandbox = metrics.sandbox_s
        for child in self._running.values():
            used = child.usage()
            cost, tokens, calls = cost + used.cost_usd, tokens + used.tokens, calls + used.llm_calls
            sandbox += used.sandbox_s
        return Usage(
            cost_usd=cost,
            tokens=tokens,
            llm_calls=calls,
            steps=metrics.total_steps,
            duration_s=(utc_now() - self.started_at).total_seconds(),
            sandbox_s=sandbox,
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
        if not self._then_live:
            divergence = self._divergence or self.unreplayed()
            self.replay_report = ReplayReport(
                reproduced=divergence is None,
                match=self._match,
                recorded_steps=len(self._journal),
                matched_steps=len(self._journal)
                if divergence is None
                else divergence.step_number - 1,
                divergence=divergence,
            )

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


class ChainDiverged(OmniForgeError):
    """A run did not do what the chain it replays says was done: a resumed run cannot go on
    from its stored steps, a replay did not reproduce its recording."""

    def __init__(self, difference: StepDifference, *, resumed: bool) -> None:
        what = "the resumed run did not repeat its stored steps" if resumed else "diverged"
        super().__init__(f"{what}: {difference.describe()}")
        self.difference = difference
        self.step_number = difference.step_number
