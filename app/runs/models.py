"""What a client submits."""

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from app.agents.spec import KIND_PATTERN
from app.chain import Budget, ReasoningChain
from app.chain.replay import ReplayMatch
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.resources.toolbox import TenantTools
from app.resources.webhooks.subscriptions import NONE as NO_SUBSCRIPTIONS
from app.resources.webhooks.subscriptions import Subscriptions
from app.resources.webhooks.urls import WebhookUrl
from app.security.visibility import StepFacts
from app.tools.approvals import ApprovalRules
from app.tools.models import TOOL_NAME_PATTERN

MAX_INPUT_CHARS = 200_000
"""What a task may give the model in all: its `input`, or its messages' text together."""
MAX_ATTACHED_FILES = 20
"""Files one task or conversation may be given in one request."""
MAX_CONVERSATION_FILES = 50
"""Files a conversation's turns may read in all (its own and those its turns added)."""
MAX_METADATA_BYTES = 16_384
MAX_METADATA_DEPTH = 8

ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]

AGENT_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
AGENT_REF_PATTERN = r"^[a-z][a-z0-9_-]{0,63}(@[1-9][0-9]{0,8})?$"
AgentName = Annotated[
    str,
    Field(
        pattern=AGENT_NAME_PATTERN,
        description="Lower-case letters, digits, `-` and `_`, starting with a letter; unique in "
        "the tenant.",
    ),
]
AgentRef = Annotated[
    str,
    Field(
        pattern=AGENT_REF_PATTERN,
        description="An agent definition: `name` (its newest version) or `name@N` (version N).",
    ),
]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


def _bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    if _depth(value) > MAX_METADATA_DEPTH:
        raise ValueError(f"nests deeper than {MAX_METADATA_DEPTH} levels")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; at most {MAX_METADATA_BYTES} are kept")
    return value


Metadata = Annotated[
    dict[str, Any],
    AfterValidator(_bounded_metadata),
    Field(
        description=f"Kept with the task and returned as is: at most {MAX_METADATA_BYTES} bytes "
        f"as JSON, nested at most {MAX_METADATA_DEPTH} deep."
    ),
]


class ChatMessage(BaseModel):
    """A chat message in OpenAI format; extra fields (`tool_calls`, `name`...) pass through."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = Field(default=None, max_length=MAX_INPUT_CHARS)

    @property
    def chars(self) -> int:
        """Its text: the content and its extra fields as JSON."""
        extra = self.model_extra or {}
        size = len(self.content or "")
        if extra:
            size += len(json.dumps(extra, ensure_ascii=False, separators=(",", ":")))
        return size


TaskBudget = Budget
"""Hard limits of one task; a run that would cross one ends `budget_exceeded`."""


class TaskSubmission(BaseModel):
    """A task: a text `input` or chat `messages`, and optionally how it may run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"input": "What is 17 * 23 + 4?"}]},
    )

    input: str | None = Field(default=None, min_length=1, max_length=MAX_INPUT_CHARS)
    messages: list[ChatMessage] | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description=f"At most {MAX_INPUT_CHARS} characters in all (contents and extra fields).",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=255, description="Default: the service's."
    )
    tools: list[ToolName] | None = Field(
        default=None,
        max_length=64,
        description="Tools the agent may use (default: every tool).",
    )
    budget: TaskBudget | None = Field(
        default=None,
        description="Limits of this task; unset ones come from its agent's, then its tenant's. "
        "A limit above its agent's is refused.",
    )
    metadata: Metadata = Field(default_factory=dict)
    agent: AgentRef | None = Field(
        default=None,
        description="The agent that runs the task (default: the conversation's, else the "
        "built-in `default`). Its `model`, `tools` and `budget` bound the task's.",
    )
    kind: str | None = Field(
        default=None,
        pattern=KIND_PATTERN,
        description="The strategy this task runs with instead of its agent's `kind`: `direct`, "
        "`cot`, `react`, `tot`, `mcts`, `plan`, `auto` or a plugin's kind.",
    )
    conversation_id: UUID | None = Field(
        default=None,
        description="Adds the task as the next turn of this conversation: its run starts from "
        "every earlier turn. One turn runs at a time (409 `conversation-busy`).",
    )
    stream_output: bool = Field(
        default=False,
        description="Stream the model's text as `output_delta` events while each LLM call "
        "runs (live only: no `id:`, not stored, not replayed).",
    )
    webhook_url: WebhookUrl | None = Field(
        default=None,
        description="Also tell this URL of the task's end (`task.completed`, `task.failed`, "
        "`task.incomplete`) and of its waits for a human (`task.input_required`), signed "
        "Standard-Webhooks style with the tenant's task webhook secret (GET "
        "/api/v1/tenants/{tenant_id}/webhooks/task-secret). It must pass the SSRF guard: a "
        "private or loopback address only where the tenant's network allow-list admits it.",
    )
    file_ids: list[UUID] | None = Field(
        default=None,
        max_length=MAX_ATTACHED_FILES,
        description="Files of the tenant given to the task (besides its conversation's): the "
        "agent is told of them and reads them with the file tools.",
    )

    @model_validator(mode="after")
    def _one_input(self) -> Self:
        if (self.input is None) == (self.messages is None):
            raise ValueError("give either `input` or `messages`, not both or neither")
        return self

    @field_validator("messages")
    @classmethod
    def _bounded_input(cls, messages: list[ChatMessage] | None) -> list[ChatMessage] | None:
        chars = sum(message.chars for message in messages or [])
        if chars > MAX_INPUT_CHARS:
            raise ValueError(f"hold {chars} characters; at most {MAX_INPUT_CHARS} in all")
        return messages

    @model_validator(mode="after")
    def _tools_once(self) -> Self:
        if self.tools is not None and len(set(self.tools)) != len(self.tools):
            raise ValueError("`tools` lists a tool twice")
        return self


@dataclass(frozen=True, slots=True)
class Origin:
    """The recorded task a replay or a fork re-runs: a replay (`fork_step` None) takes every
    result from the recording and makes no call, its steps compared as `match` says; a fork
    takes the steps up to `fork_step` as recorded, then goes on live."""

    task_id: UUID
    chain_id: UUID
    fork_step: int | None = None
    match: ReplayMatch = ReplayMatch.REQUESTS
    # The conversation before the recorded task's turn, when it was one: the new task is no
    # turn, but its run starts from the same history.
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_replay(self) -> bool:
        return self.fork_step is None

    def task_columns(self) -> dict[str, Any]:
        if self.is_replay:
            return {"replayed_from": self.task_id, "replay_match": self.match}
        return {"forked_from": self.task_id, "fork_step": self.fork_step}

    def chain_columns(self) -> dict[str, Any]:
        return {"replayed_from" if self.is_replay else "forked_from": self.chain_id}


@dataclass(frozen=True, slots=True)
class FamilyLink:
    """Where a sub-agent's run sits: its parent's live chain, the agents above it (the
    family's first first) and the facts of the call step that started it (by which each
    reader of an ancestor's stream sees its events or not; None where unknown)."""

    parent_chain: ReasoningChain
    path: tuple[str, ...]
    call: StepFacts | None = None


@dataclass(frozen=True, slots=True)
class ChildColumns:
    """A child task's links, as stored."""

    parent_task_id: UUID
    parent_step_id: UUID
    root_task_id: UUID
    depth: int
    parent_chain_id: UUID

    def task_columns(self) -> dict[str, Any]:
        return {
            "parent_task_id": self.parent_task_id,
            "parent_step_id": self.parent_step_id,
            "root_task_id": self.root_task_id,
            "depth": self.depth,
        }


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file given to a task: its id, and the line that tells the model of it."""

    file_id: UUID
    description: str


@dataclass(frozen=True, slots=True)
class RunPolicy:
    """What a task's tenant and caller allow its run: the caller's roles (for tools'
    `required_roles`), the tools the tenant enabled (None: all), the tenant's extra
    sensitive field names (for the audit log's redaction), its quotas (with its default
    budget) and its model policy."""

    roles: frozenset[str]
    enabled_tools: frozenset[str] | None = None
    sensitive_fields: frozenset[str] = frozenset()
    quotas: TenantQuotas = field(default_factory=TenantQuotas)
    models: ModelPolicy = field(default_factory=ModelPolicy)
    # The tenant's tools (its MCP servers' besides the process's) and what they reach; None:
    # the process's tools, with no services.
    tools: TenantTools | None = None
    # Whether the caller may have tools run at all (`tool:execute`); without it a run gets
    # the model alone.
    executes_tools: bool = True
    # The caller's API key's own limits, on top of the tenant's, kept under `key_scope`.
    key_quotas: TenantQuotas | None = None
    key_scope: str | None = None
    # The tenant's rules for which tool calls wait for a human; None: none of its own.
    approvals: ApprovalRules | None = None
    # The tenant's webhook endpoints, as its run starts, and the events each receives.
    webhooks: Subscriptions = NO_SUBSCRIPTIONS
