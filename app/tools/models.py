"""Tool definitions, call contexts and what a tool returns."""

import base64
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self
from uuid import UUID

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.chain import FailedAttempt, ToolType, VisibilityLevel
from app.chain.models import DataLabel
from app.ids import uuid4
from app.llm.types import DeltaKind
from app.tools.approvals import ApprovalMode
from app.tools.errors import ErrorClass

if TYPE_CHECKING:
    from app.chain import ReasoningStep
    from app.tools.approvals import ApprovalGate
    from app.tools.guards import ToolGuard
    from app.tools.registry import ToolRegistry
    from app.tools.services import ToolServices

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class RetryPolicy(BaseModel):
    """Which failures are retried, how often, and how long to back off between attempts.

    The delay before attempt n+1 is `initial_backoff_s * multiplier**(n-1)`, capped at
    `max_backoff_s`, then spread by +/- `jitter` (a fraction) and capped again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=3, ge=1, le=10)
    initial_backoff_s: float = Field(default=0.5, ge=0)
    multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    max_backoff_s: float = Field(default=8.0, ge=0)
    jitter: float = Field(default=0.1, ge=0.0, le=1.0)
    retry_on: frozenset[ErrorClass] = frozenset(
        {ErrorClass.TIMEOUT, ErrorClass.RATE_LIMIT, ErrorClass.TRANSIENT}
    )

    def should_retry(self, error_class: ErrorClass, attempt: int) -> bool:
        return attempt < self.max_attempts and error_class in self.retry_on

    def backoff_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Delay after failed attempt `attempt` (1-based); a server's Retry-After is honoured
        up to the cap."""
        delay = min(self.initial_backoff_s * self.multiplier ** (attempt - 1), self.max_backoff_s)
        if self.jitter:
            delay *= 1 + random.uniform(-self.jitter, self.jitter)  # not for security
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return min(delay, self.max_backoff_s)


NO_RETRY = RetryPolicy(max_attempts=1)


class ToolVisibilityConfig(BaseModel):
    """How a tool's steps show to readers without full access."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_level: VisibilityLevel = VisibilityLevel.FULL
    summary_template: str | None = Field(
        default=None,
        description="str.format template over the result's fields, e.g. "
        "'Queried {table}: {row_count} rows'; missing fields render as '?'.",
    )
    sensitive_fields: tuple[str, ...] = ()


class ToolPermissions(BaseModel):
    """Who may use a tool (any one of `required_roles`; none: anyone) and how much of each
    call the audit log keeps: `basic` the redacted arguments and the outcome, `full` the
    redacted result as well."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    required_roles: tuple[str, ...] = ()
    audit_level: Literal["basic", "full"] = "basic"


class Egress(StrEnum):
    """Whether a tool's call can send data out of the service: `none`; `url`, to the URL
    of its `url` argument (the web tools); `any`, wherever its other side passes it on (MCP
    tools that may write or reach the open world, remote agents, sub-agents)."""

    NONE = "none"
    URL = "url"
    ANY = "any"


class ToolDefinition(BaseModel):
    """Everything the system knows about a tool besides its code.

    `parameters` is a JSON Schema object, so one definition renders both as an OpenAI-style
    function tool (`to_openai_tool`) and as a text description for ReAct prompts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    type: ToolType
    description: str
    version: str = "1.0.0"
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    returns_description: str = ""
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    retry: RetryPolicy = NO_RETRY
    max_result_chars: int | None = Field(default=None, ge=64)
    cache_ttl_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86_400,
        description="Answer an identical call (same tenant, tool and arguments) within this "
        "many seconds from the first one's result: `cached: true`, no cost. Off when unset.",
    )
    idempotent: bool = Field(
        default=False,
        description="Whether a call may be made again when a run resumes and its first "
        "attempt's outcome is unknown (the process stopped while it ran): reads and pure "
        "computations are; calls with side effects are not.",
    )
    approval: ApprovalMode = Field(
        default=ApprovalMode.NEVER,
        description="`always`: every call waits for a human's decision before it is made. "
        "Its tenant's and agent's rules may ask for approval too; any `always` wins.",
    )
    untrusted_output: bool = Field(
        default=False,
        description="Its results may carry text that neither the run's user nor the tenant "
        "wrote (a web page, another service's answer): instructions in it are not to be "
        "obeyed, and the run counts as having read untrusted content.",
    )
    private_output: bool = Field(
        default=False,
        description="Its results hold data that is not public (the run then counts as "
        "holding private data).",
    )
    egress: Egress = Field(
        default=Egress.NONE,
        description="Whether a call can send data out of the service: once a run holds "
        "untrusted and private data, such a call waits for a human unless the tenant "
        "allows it.",
    )
    visibility: ToolVisibilityConfig = ToolVisibilityConfig()
    permissions: ToolPermissions = ToolPermissions()

    @model_validator(mode="after")
    def _parameters_are_an_object_schema(self) -> Self:
        try:
            Draft202012Validator.check_schema(self.parameters)
        except SchemaError as exc:
            raise ValueError(f"parameters are not a valid JSON Schema: {exc.message}") from exc
        if self.parameters.get("type") != "object":
            raise ValueError("a tool's parameters must be a JSON Schema of type 'object'")
        return self

    def to_openai_tool(self) -> dict[str, Any]:
        """The OpenAI function tool: one object per definition, shared by every call that
        offers the tool (its JSON is serialised once, `app.llm.wire`): not to be changed."""
        return self._openai_tool

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("_openai_tool", None)  # a copy with changes renders its own
        return copy

    @cached_property
    def _openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def to_react_description(self) -> str:
        lines = [f"{self.name}: {self.description}"]
        properties: dict[str, Any] = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        if properties:
            lines.append("  Arguments (a JSON object):")
        for arg, schema in properties.items():
            kind = schema.get("type", "any")
            if isinstance(kind, list):
                kind = " | ".join(kind)
            flag = "required" if arg in required else "optional"
            text = f"    - {arg} ({kind}, {flag})"
            if description := schema.get("description"):
                text += f": {description}"
            if "enum" in schema:
                text += f" One of: {json.dumps(schema['enum'])}."
            lines.append(text)
        if self.returns_description:
            lines.append(f"  Returns: {self.returns_description}")
        return "\n".join(lines)


class ModelAccess(Protocol):
    """The models a run may reach: the LLM tool asks before the call and for each fallback,
    and caps the output a call may ask for."""

    def approves(self, model: str) -> bool: ...

    def output_cap(self, model: str) -> int | None: ...


@dataclass(frozen=True, slots=True)
class OutputDelta:
    """A piece of a call's output while the call runs (the LLM's reply as it streams).

    `step_id` is the call's `tool_call` step and `correlation_id` ties it to the `tool_result`
    step that completes it, which holds the whole text. A call retried after its stream broke
    off streams again from the start, as `attempt` says. `level` is the call step's stored
    visibility, so that a reader who may not see the call gets none of its output; `after` is
    how many events the run had emitted when the piece came (the call step among them): the
    piece's place in the run's stream. The tool sets the rest; the run sets `after`.
    """

    step_id: UUID
    correlation_id: UUID
    attempt: int
    kind: DeltaKind
    text: str
    level: VisibilityLevel = VisibilityLevel.FULL
    after: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallContext:
    """Who is calling and where the call sits in the chain; handed to `BaseTool.execute`."""

    task_id: str
    agent_id: str
    chain_id: UUID
    tenant_id: str | None = None
    user_id: str | None = None
    correlation_id: UUID = field(default_factory=uuid4)
    parent_step_id: UUID | None = None
    attempt: int = 1
    # The tools this run may call (None: every registered tool); others fail as unknown.
    allowed_tools: frozenset[str] | None = None
    # The caller's roles, for tools' `required_roles` (None: no caller to check).
    roles: frozenset[str] | None = None
    # Streaming tools (the LLM) push their output here as it arrives, one `OutputDelta` per
    # piece; None turns streaming off (no streaming request is made).
    on_delta: Callable[[OutputDelta], None] | None = None
    # The run's own guards (its budget, its tenant's quotas and model policy), after the
    # executor's.
    guards: "tuple[ToolGuard, ...]" = ()
    # Which models the run may reach (its tenant's policy); None: every configured model.
    models: "ModelAccess | None" = None
    # The tools of this run: the process's and its tenant's own (MCP servers); None: the
    # executor's registry.
    tools: "ToolRegistry | None" = None
    # The run's secrets, files, todos and network policy (None: none of them).
    services: "ToolServices | None" = None
    # Where tools' progress reports go (`progress`); None: nowhere.
    on_progress: "Callable[[ToolProgress], None] | None" = None
    # The `tool_call` step of the call this context was made for (set by the executor).
    call_step: "ReasoningStep | None" = None
    # Which calls wait for a human, and the decisions a resumed run applies; None: none do.
    approvals: "ApprovalGate | None" = None
    # Returns once the run's events so far (the call steps just recorded among them) are
    # stored: a call that must not be made twice starts only then, so that a run resumed
    # after a crash knows it was made. None: nothing is stored (or nobody resumes).
    stored: "Callable[[], Awaitable[None]] | None" = None
    # Returns once the run may start calls: at once, unless what records it cannot store
    # their results now (the store is unavailable): then the run pauses, its calls under
    # way finishing. None: nothing holds calls back.
    ready: "Callable[[], Awaitable[None]] | None" = None
    # Awaited as a call is about to start, its guards passed (nothing else of its batch
    # begun): it waits while the run may not start calls (as `ready`), and raises where the run
    # was released meanwhile, so that a call never sent is made by whoever resumes the run
    # rather than sent late (and cut) during a drain or an outage. None: nothing.
    starting: "Callable[[], Awaitable[None]] | None" = None
    # The child tasks this call started (a sub-agent's, a remote agent's record), for its
    # result to name even where the call ends without an answer (cancelled, failed).
    started: list["ChildRun"] = field(default_factory=list)
    # The strategy making the call (an agent kind: `react`, `plan`...), which its cost record
    # keeps; None: none says (library use).
    strategy: str | None = None

    def at(
        self,
        *,
        correlation_id: UUID | None = None,
        parent_step_id: UUID | None = None,
        attempt: int | None = None,
        call_step: "ReasoningStep | None" = None,
    ) -> "ToolCallContext":
        """This context for one call (or attempt): the executor makes one per call, so this
        is `dataclasses.replace` without its per-field introspection (a third of its cost)."""
        return ToolCallContext(
            self.task_id,
            self.agent_id,
            self.chain_id,
            self.tenant_id,
            self.user_id,
            self.correlation_id if correlation_id is None else correlation_id,
            self.parent_step_id if parent_step_id is None else parent_step_id,
            self.attempt if attempt is None else attempt,
            self.allowed_tools,
            self.roles,
            self.on_delta,
            self.guards,
            self.models,
            self.tools,
            self.services,
            self.on_progress,
            self.call_step if call_step is None else call_step,
            self.approvals,
            self.stored,
            self.ready,
            self.starting,
            # A new call starts its own children; its attempts share them.
            self.started if call_step is None else [],
            self.strategy,
        )

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Reports how the call is going: each report becomes a `tool_progress` event of the
        run's stream, after the call's step and before its result. `fraction` is how much is
        done, 0 to 1, when the tool knows. Never blocks; a report outside a call is dropped."""
        if self.on_progress is None or self.call_step is None:
            return
        if fraction is not None:
            fraction = min(max(float(fraction), 0.0), 1.0)
            if fraction != fraction:  # NaN
                fraction = None
        if self.services is not None:  # a remote server's report may echo what it was sent
            message = self.services.redact(message)
        self.on_progress(ToolProgress(self.call_step, message, fraction))


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A tool's report on a call under way: the call's step, what it is doing, how far."""

    call_step: "ReasoningStep"
    message: str
    fraction: float | None = None


MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types models that take images accept (OpenAI's, Anthropic's and Gemini's)."""
MAX_MODEL_IMAGE_BYTES = 3_750_000
"""The largest image handed to a model as it is (Anthropic's limit, the strictest)."""


@dataclass(frozen=True, slots=True)
class ModelImage:
    """An image a tool hands to the model beside its value, for a model that takes images.
    The value describes it; the image itself is not stored in the chain."""

    media_type: str
    data: bytes

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class ChildRun:
    """The sub-agent task a call started, and what it and its own sub-agents used: the call's
    result names it and carries its usage. A local sub-agent's usage is recorded in the
    child's own cost records, so it is never billed again; a remote agent's task, which our
    child task only records (`billed` False), is billed by the call."""

    task_id: UUID
    chain_id: UUID
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    llm_calls: int = 0
    cost_usd: Decimal = Decimal(0)
    unpriced: bool = False
    billed: bool = True

    def result_fields(self) -> dict[str, Any]:
        """Its part of the call's `ToolResultInfo`: a remote task's record gives its ids and
        the remote's LLM calls (the call's own output says what else it used)."""
        ids = {"child_task_id": self.task_id, "child_chain_id": self.chain_id}
        if not self.billed:
            return {**ids, "llm_calls": self.llm_calls}
        return {
            **ids,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "llm_calls": self.llm_calls,
            "cost_usd": self.cost_usd,
            "unpriced": self.unpriced,
        }


@dataclass(slots=True)
class ToolOutput:
    """What a successful `execute` returns: the value and, if the tool knows it, its usage;
    `images` go to a model that takes images (and nowhere else)."""

    value: Any
    images: tuple[ModelImage, ...] = ()
    model: str | None = None
    provider: str | None = None
    deployment: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: Decimal | None = None
    unpriced: bool = False
    cached: bool = False
    # CPU seconds of a sandbox call (its cost in `cost_usd`).
    sandbox_s: float | None = None
    # Failures inside the successful attempt (e.g. deployments the LLM router fell back from).
    failed_attempts: list[FailedAttempt] = field(default_factory=list)
    # A sub-agent call's child task (its usage replaces the fields above in the result).
    child: ChildRun | None = None
    # What this result holds beyond its tool's declared labels (e.g. another member's file:
    # `untrusted`); see `app.tools.dataflow`.
    labels: frozenset[DataLabel] = frozenset()


@dataclass(frozen=True, slots=True)
class CallEstimate:
    """A pre-call estimate for budgets: prompt tokens counted, the output cap as output."""

    input_tokens: int
    max_output_tokens: int
    cost_usd: Decimal | None
