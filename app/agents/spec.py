"""What an agent definition asks of the runtime: its kind, instructions, model, tools and
limits. The service stores definitions (named, versioned, per tenant); the runtime only ever
sees the `AgentSpec` of the version a task runs."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.tools.approvals import ApprovalRules
from app.tools.models import TOOL_NAME_PATTERN
from app.tools.subagents import SUB_AGENT_REF_PATTERN

KIND_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
DEFAULT_KIND = "react"

OnLimit = Literal["fail", "answer"]
ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]
ToolEntry = Annotated[str, Field(pattern=f"({TOOL_NAME_PATTERN})|({SUB_AGENT_REF_PATTERN})")]
"""A tool's name, or another agent of the tenant as a tool: `agent:name` or `agent:name@N`."""


class AgentApprovals(ApprovalRules):
    """Which of the agent's tool calls wait for a human, besides its tenant's rules and the
    tools' own, and who may decide."""

    submitter_decides: bool = Field(
        default=False,
        description="Whether a task's submitter may decide on its calls, besides the holders "
        "of `task:approve` (tenant admins).",
    )


class AgentSpec(BaseModel):
    """How one agent runs. Every field left unset behaves as the built-in default agent does
    (the service's settings, its tenant's defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(
        default=DEFAULT_KIND,
        pattern=KIND_PATTERN,
        description="The agent's implementation: `react` (built in) or a kind a plugin "
        "registers under the `omniforge.agent_kinds` entry point group.",
    )
    instructions: str | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="The system prompt. A task's own `system` messages come after it, never "
        "instead of it. Unset: the built-in ReAct prompt.",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=255, description="A model of the model list."
    )
    tools: list[ToolEntry] | None = Field(
        default=None,
        max_length=128,
        description="The tools it may use; unset: every tool its tenant enabled. "
        "`agent:name` (or `agent:name@N`, a pinned version) makes another agent of the "
        "tenant a tool (`agent__name`, of type `sub_agent`): a call runs it on a task of "
        "its own, a child of this one, and answers with its answer.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_iterations: int | None = Field(default=None, ge=1, le=200)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    response_format: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Schema the final answer must match; the valid answer is the "
        "task's `output`.",
    )
    on_limit: OnLimit = Field(
        default="fail",
        description="When `max_iterations` or a budget stops a run: `fail` (the task fails "
        "with the limit's error code) or `answer` (the agent keeps back what one last "
        "tool-less call needs, makes it, and the task ends `incomplete` with that answer).",
    )
    approvals: AgentApprovals | None = Field(
        default=None,
        description="Tool calls that wait for a human's approval before they are made: by "
        "tool name (`tools`) or type (`types`), `always` or `never`; the strictest of the "
        "tool's, the tenant's and these rules applies.",
    )
