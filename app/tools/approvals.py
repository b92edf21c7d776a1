"""Human approval of tool calls: who says a call needs it, what was decided, and how a call
that waits for a decision stops its run.

A tool, its tenant, its agent and (for MCP tools) its server each may say `approval:
always` for a tool by name or for every tool of a type; the strictest wins. Besides, a call
that could send data out waits once its run holds untrusted and private data (`DataFlow`,
`app.tools.dataflow`), unless the rules say `exfiltration: allow`. A call that needs
approval and has no decision yet suspends the run (`ApprovalPending`): its call steps are
recorded, nothing of its batch runs, and the run is resumed from its stored steps once a
human has decided. The decision is then applied where the call is replayed: approved calls
run (with the arguments the reviewer may have edited), denied ones fail with
`approval_denied` for the model to read.
"""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.chain import ReasoningStep, ToolType
from app.chain.models import utc_now
from app.tools.dataflow import DataFlow, ExfiltrationMode


class ApprovalMode(StrEnum):
    NEVER = "never"
    ALWAYS = "always"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    # Nobody decided within its `timeout_s`: denied by the service.
    EXPIRED = "expired"

    @property
    def approves(self) -> bool:
        return self is ApprovalStatus.APPROVED


MAX_TIMEOUT_S = 30 * 86_400


class ApprovalRules(BaseModel):
    """Which tool calls wait for a human: by tool name, and by tool type. A name rule and a
    type rule may both apply to a call; with the rules of the tool itself, its tenant, its
    agent and its MCP server, any `always` wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: dict[str, ApprovalMode] = Field(
        default_factory=dict,
        max_length=256,
        description='By tool name, e.g. `{"http_request": "always"}`.',
    )
    types: dict[ToolType, ApprovalMode] = Field(
        default_factory=dict,
        description='By tool type, e.g. `{"mcp": "always"}` for every MCP tool.',
    )
    timeout_s: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIMEOUT_S,
        description="How long a call waits for a decision before it is denied on its own; "
        "unset: the next rules' (agent, then tenant), else the service's default.",
    )
    exfiltration: ExfiltrationMode | None = Field(
        default=None,
        description="What a call that could send data out of the service (a web request to "
        "a URL the run has not fetched, an MCP tool that may write, a remote agent) does once "
        "its run has read untrusted content and private data: `approve` waits for a human, "
        "`allow` lets it go; unset: the next rules' (agent, then tenant), else `approve`.",
    )

    def says_always(self, name: str, tool_type: ToolType) -> bool:
        return (
            self.tools.get(name) is ApprovalMode.ALWAYS
            or self.types.get(tool_type) is ApprovalMode.ALWAYS
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """What a human (or the timeout) decided for one call."""

    approval_id: UUID
    status: ApprovalStatus
    decided_by: str | None
    reason: str | None
    arguments: dict[str, Any] | None  # edited arguments; None: as the model gave them


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A call that waits: its recorded call step and what the reviewer is asked about."""

    approval_id: UUID
    call_step: ReasoningStep
    tool_name: str
    tool_type: ToolType
    arguments: dict[str, Any]
    input_schema: dict[str, Any]
    expires_at: datetime
    # Why it is asked (e.g. a call whose outcome is unknown after a restart); None: its policy.
    note: str | None = None


class ApprovalPending(BaseException):
    """Raised where a batch of calls needs decisions: the run stops there, its calls
    recorded, none of them made. `held` are the batch's other calls, that wait with them.
    Not an `Exception`, so no agent's error handling takes it for a failed call."""

    def __init__(self, pending: Sequence[PendingApproval], held: Sequence[UUID]) -> None:
        super().__init__(f"{len(pending)} tool calls wait for approval")
        self.pending = list(pending)
        self.held = list(held)


@dataclass(slots=True)
class ApprovalGate:
    """One run's approval rules and the decisions it has to apply (those of its previous
    suspension), with what to call once it acts on them (`consume`), so that a later resume
    does not act on them twice."""

    rules: Sequence[ApprovalRules] = ()
    decisions: Mapping[UUID, Decision] = field(default_factory=dict)  # by call step id
    held: frozenset[UUID] = frozenset()  # call step ids of calls that waited with them
    # Stores the calls that are to wait (and the batch's others, held), before the run stops.
    ask: Callable[[Sequence[PendingApproval], Sequence[UUID]], Awaitable[None]] | None = None
    consume: Callable[[Sequence[UUID]], Awaitable[None]] | None = None
    # How long a call waits before it is denied on its own.
    timeout_s: float = 86_400.0
    # What the run has read, and which calls could carry it out (they wait, unless allowed).
    flow: DataFlow = field(default_factory=DataFlow)
    _consumed: bool = False

    def expiry(self) -> datetime:
        return utc_now() + timedelta(seconds=self.timeout_s)

    def needs(self, name: str, tool_type: ToolType, own: ApprovalMode) -> bool:
        if tool_type is ToolType.LLM:
            return False
        return own is ApprovalMode.ALWAYS or any(r.says_always(name, tool_type) for r in self.rules)

    def decision(self, step_id: UUID) -> Decision | None:
        return self.decisions.get(step_id)

    def waited(self, step_id: UUID) -> bool:
        """Whether the call waited for others' approval: it never started."""
        return step_id in self.held or step_id in self.decisions

    async def acted(self) -> None:
        """The decisions are being acted on: stored as used, once, before any call runs."""
        if self._consumed or not self.decisions or self.consume is None:
            return
        self._consumed = True
        await self.consume([d.approval_id for d in self.decisions.values()])


def exfiltration_of(rules: Sequence[ApprovalRules]) -> ExfiltrationMode:
    """The first rules' `exfiltration` that is set (agent before tenant), else `approve`."""
    for rule in rules:
        if rule.exfiltration is not None:
            return rule.exfiltration
    return ExfiltrationMode.APPROVE


def timeout_of(rules: Sequence[ApprovalRules], default_s: float) -> float:
    """The first rules' timeout that is set (agent before tenant), else `default_s`."""
    for rule in rules:
        if rule.timeout_s is not None:
            return float(rule.timeout_s)
    return default_s
