"""What a client submits."""

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.chain import Budget
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.tools.models import TOOL_NAME_PATTERN

MAX_INPUT_CHARS = 200_000

ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]


class ChatMessage(BaseModel):
    """A chat message in OpenAI format; extra fields (`tool_calls`, `name`...) pass through."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = Field(default=None, max_length=MAX_INPUT_CHARS)


TaskBudget = Budget
"""Hard limits of one task; a run that would cross one ends `budget_exceeded`."""


class TaskSubmission(BaseModel):
    """A task: a text `input` or chat `messages`, and optionally how it may run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"input": "What is 17 * 23 + 4?"}]},
    )

    input: str | None = Field(default=None, min_length=1, max_length=MAX_INPUT_CHARS)
    messages: list[ChatMessage] | None = Field(default=None, min_length=1, max_length=500)
    model: str | None = Field(
        default=None, min_length=1, max_length=255, description="Default: the service's."
    )
    tools: list[ToolName] | None = Field(
        default=None,
        max_length=64,
        description="Tools the agent may use (default: every tool).",
    )
    budget: TaskBudget | None = Field(
        default=None, description="Limits of this task; unset ones come from its tenant's."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Kept with the task and returned as is."
    )

    @model_validator(mode="after")
    def _one_input(self) -> Self:
        if (self.input is None) == (self.messages is None):
            raise ValueError("give either `input` or `messages`, not both or neither")
        return self

    @model_validator(mode="after")
    def _tools_once(self) -> Self:
        if self.tools is not None and len(set(self.tools)) != len(self.tools):
            raise ValueError("`tools` lists a tool twice")
        return self


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
