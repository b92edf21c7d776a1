"""What the repositories hand back: plain typed records, no SQLAlchemy rows."""

import ipaddress
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.chain import Budget, ChainMetrics, ChainStatus, ErrorCode, TaskState
from app.chain.replay import ReplayMatch, ReplayReport


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
    budget: Budget | None = None
    final_answer: str | None
    error_code: ErrorCode | None
    error_message: str | None
    last_seq: int
    usage: ChainMetrics
    # The process (runner) that runs or ran it.
    runner_id: str | None = None
    agent_name: str | None = None
    agent_version: int | None = None
    conversation_id: UUID | None = None
    turn: int | None = None
    output: Any = None
    stop_reason: str | None = None
    file_ids: list[str] | None = None
    # Who it runs as (NULL on tasks from before the queue: the submitter with no roles).
    roles: list[str] | None = None
    api_key_id: UUID | None = None
    # A cancel requested while another instance ran it.
    cancel_reason: str | None = None
    resumes: int = 0
    # The epoch of the claim that holds it (the fence of its run's writes), and its failed
    # attempts (its run could not be started or its end stored).
    owner_epoch: int = 0
    failures: int = 0
    # A replay of another task (what its steps must repeat, and how it went), or a fork of one.
    replayed_from: UUID | None = None
    replay_match: ReplayMatch | None = None
    replay_report: ReplayReport | None = None
    forked_from: UUID | None = None
    fork_step: int | None = None
    # The schedule whose firing made it.
    schedule_id: UUID | None = None
    # A sub-agent's task: whose call started it, its family's first task, its depth.
    parent_task_id: UUID | None = None
    parent_step_id: UUID | None = None
    root_task_id: UUID | None = None
    depth: int = 0
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def is_finished(self) -> bool:
        return self.status.is_terminal

    @property
    def is_queued(self) -> bool:
        """Accepted, and not yet started by any instance."""
        return self.status is TaskState.SUBMITTED


class ChainRecord(_Record):
    id: UUID
    task_id: UUID
    tenant_id: str
    agent_id: str
    parent_chain_id: UUID | None
    replayed_from: UUID | None = None
    forked_from: UUID | None = None
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
    """A stored step as a stream event: the step's and the running metrics' JSON text, and
    the columns the visibility filter decides by."""

    seq: int
    timestamp: datetime
    step: str
    metrics: str
    type: str
    tool_type: str | None
    tool_name: str | None
    visibility: str


class StoredRelay(_Record):
    """An event of a sub-agent's task relayed into an ancestor's stream, as stored there: a
    pointer (`RELAYED` row) to the child's own stored event or step, read with it."""

    seq: int
    task_id: UUID
    chain_id: UUID
    depth: int
    parent_step_id: UUID | None
    # The facts (type, tool type, tool name, level) of the call steps it hangs under.
    calls: list[tuple[str, str | None, str | None, str]] = Field(default_factory=list)
    event: StoredEvent | StoredStep


RELAYED = "relayed"
"""The `task_events` type of a pointer to a descendant's event (its data: the child's task,
chain and event number, its depth and the call step that started it)."""


class TenantRecord(_Record):
    id: str
    name: str
    status: str
    visibility: dict[str, Any]
    quotas: dict[str, Any]
    default_budget: dict[str, Any]
    models: dict[str, Any]
    enabled_tools: list[str] | None
    # A `NetworkAllow` document (`app.storage.tenants`); a bare list from before it.
    network_allow: dict[str, list[str]] | list[str] | None = None
    approvals: dict[str, Any] | None = None
    # Its own retention periods in days; None: the platform's.
    retention_days: int | None = None
    audit_retention_days: int | None = None
    created_at: datetime
    updated_at: datetime

    @property
    def is_active(self) -> bool:
        return self.status == "active"


class AuditRecord(_Record):
    id: int
    tenant_id: str
    actor: str
    action: str
    resource_type: str
    resource_id: str | None
    details: dict[str, Any]
    created_at: datetime


class CostRecordRow(_Record):
    """One priced (or unpriced) call, as billed."""

    id: int
    tenant_id: str
    user_id: str | None
    task_id: UUID
    chain_id: UUID
    step_id: UUID
    # The call it bills (its `tool_call` and `tool_result` steps share it).
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
    # The strategy (agent kind) that made the call; None for calls recorded before it was.
    strategy: str | None = None
    # CPU seconds of a sandbox call; None for other calls.
    sandbox_s: Decimal | None = None


class AgentRecord(_Record):
    """An agent definition's version, with its agent's name and state."""

    id: UUID
    tenant_id: str
    name: str
    version: int
    latest_version: int
    status: str
    definition: dict[str, Any]
    created_by: str
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None = None
    version_created_by: str
    version_created_at: datetime

    @property
    def archived(self) -> bool:
        return self.status == "archived"


class ConversationRecord(_Record):
    id: UUID
    tenant_id: str
    user_id: str
    agent_name: str
    agent_version: int | None
    metadata: dict[str, Any]
    turns: int
    file_ids: list[UUID] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime

    @field_validator("file_ids", mode="before")
    @classmethod
    def _no_files(cls, value: object) -> object:
        return [] if value is None else value

    @property
    def agent_ref(self) -> str:
        """The agent its turns run: `name` (its newest version) or `name@N` (pinned)."""
        if self.agent_version is None:
            return self.agent_name
        return f"{self.agent_name}@{self.agent_version}"


FileVisibility = Literal["private", "tenant"]
"""Who may read a file: its uploader alone (`private`), or every member of its tenant."""


class FileRecord(_Record):
    """An uploaded file, without its bytes."""

    id: UUID
    tenant_id: str
    name: str
    media_type: str
    size_bytes: int
    sha256: str
    pages: int | None = None
    width: int | None = None
    height: int | None = None
    text_chars: int | None = None
    created_by: str
    created_at: datetime
    visibility: FileVisibility = "tenant"


class FileTextRecord(_Record):
    """A chunk of a file's extracted text: a PDF's page (or part of one), or part of a text."""

    page: int | None
    text: str


class FileHit(_Record):
    """A file that matches a search: its best-matching chunk's page, rank (higher is better)
    and a snippet with the matched words marked `**like this**`."""

    file: FileRecord
    page: int | None
    rank: float
    snippet: str


class ApiKeyRecord(_Record):
    """An API key without its secret (only the secret's digest is stored)."""

    id: UUID
    tenant_id: str
    name: str
    prefix: str
    secret_sha256: str
    roles: list[str]
    quotas: dict[str, Any] | None
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None

    def usable_at(self, moment: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or moment < self.expires_at)


@dataclass(frozen=True, slots=True)
class NetworkAllow:
    """A tenant's network allow-lists as `tenants.network_allow` keeps them: its own entries
    (`allow`, set by its admins: host names and public networks) and its platform allowance
    (`platform_allow`, set by platform admins: anything, loopback and private ranges
    included). A bare list is one stored before the two were told apart, unchecked: it counts
    as the tenant's own, and only its host names apply until an admin sets it again."""

    allow: tuple[str, ...] = ()
    platform_allow: tuple[str, ...] = ()
    unchecked: bool = False

    @classmethod
    def of(cls, document: Any) -> "NetworkAllow":
        if isinstance(document, list):
            return cls(tuple(map(str, document)), unchecked=True)
        if isinstance(document, dict):
            return cls(
                tuple(map(str, document.get("allow") or ())),
                tuple(map(str, document.get("platform_allow") or ())),
            )
        return cls()

    def document(self) -> dict[str, list[str]] | None:
        """What the column stores (None: nothing allowed)."""
        if not self.allow and not self.platform_allow:
            return None
        return {"allow": list(self.allow), "platform_allow": list(self.platform_allow)}

    @property
    def effective(self) -> list[str]:
        """The entries that apply: the tenant's (of an unchecked list, its host names) and
        the platform's."""
        own = [entry for entry in self.allow if not (self.unchecked and _numeric(entry))]
        return [*own, *self.platform_allow]


def _numeric(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return any(character.isdigit() for character in entry) and ":" in entry
    return True
