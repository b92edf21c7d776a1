"""What the API answers, as typed models with the API's own field names (each names the
OpenAPI schema it mirrors in `api_schema`; a test holds them to `openapi/openapi.json`).

Fields a newer service adds are kept, not refused (`model_extra`), so an older client goes on
working. Money is an exact `Decimal`, as the service computes it."""

from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

TaskState = Literal[
    "submitted", "working", "input_required", "completed", "incomplete", "failed", "cancelled"
]
ChainStatus = Literal[
    "initializing",
    "thinking",
    "tool_calling",
    "waiting",
    "completed",
    "incomplete",
    "failed",
    "cancelled",
]
StepType = Literal["thinking", "tool_call", "tool_result", "synthesis"]
VisibilityLevel = Literal["full", "summary", "hidden"]
StopReason = Literal["max_iterations", "max_cost_usd", "max_tokens", "max_llm_calls"]
GroupBy = Literal["model", "day", "tool", "task", "user", "agent", "strategy"]
CostOrder = Literal["key", "cost"]
# Open sets: plugins add tool types, and the service may add error codes.
ToolType = str
ErrorCode = str

TERMINAL_STATES: frozenset[str] = frozenset({"completed", "incomplete", "failed", "cancelled"})


class ApiModel(BaseModel):
    """A model of an API answer; `api_schema` names its OpenAPI schema."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    api_schema: ClassVar[str]


ItemT = TypeVar("ItemT", bound=ApiModel)


class Page(ApiModel, Generic[ItemT]):
    """One page of a list; `next_cursor` fetches the next (None: the last page)."""

    items: list[ItemT]
    next_cursor: str | None


class Budget(ApiModel):
    api_schema = "Budget-Output"

    max_cost_usd: Decimal | None = None
    max_tokens: int | None = None
    max_llm_calls: int | None = None
    max_steps: int | None = None
    max_duration_s: float | None = None
    max_sandbox_s: float | None = None


class RemainingBudget(ApiModel):
    api_schema = "RemainingBudget"

    cost_usd: Decimal | None = None
    tokens: int | None = None
    llm_calls: int | None = None
    steps: int | None = None
    duration_s: float | None = None
    sandbox_s: float | None = None


class ChainMetrics(ApiModel):
    """A chain's running totals; `tool_calls` counts LLM calls too."""

    api_schema = "ChainMetrics"

    total_steps: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    failed_tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    total_cost_usd: Decimal = Decimal(0)
    unpriced_calls: int = 0
    total_duration_ms: float = 0.0
    # CPU seconds of its sandbox calls.
    sandbox_s: float = 0.0
    remaining_budget: RemainingBudget | None = None


# Tasks


class TaskAccepted(ApiModel):
    api_schema = "TaskAccepted"

    task_id: UUID
    chain_id: UUID
    status: TaskState
    stream_url: str


class AgentVersionRef(ApiModel):
    api_schema = "AgentVersionRef"

    name: str
    version: int


class StepDifference(ApiModel):
    """The first step where a replay did not repeat its recording."""

    api_schema = "StepDifference"

    step_number: int
    recorded: str | None
    replayed: str | None
    field: str | None = None
    recorded_value: str | None = None
    replayed_value: str | None = None


class ReplayReport(ApiModel):
    """Whether a replay reproduced its recording step for step."""

    api_schema = "ReplayReport"

    reproduced: bool
    match: Literal["requests", "actions"]
    recorded_steps: int
    matched_steps: int
    divergence: StepDifference | None = None


class Task(ApiModel):
    api_schema = "TaskOut"

    id: UUID
    status: TaskState
    chain_id: UUID
    agent: AgentVersionRef | None = None
    conversation_id: UUID | None = None
    turn: int | None = None
    model: str
    input: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[str] | None = None
    budget: Budget | None = None
    metadata: dict[str, Any]
    answer: str | None
    # The old name of `answer`, deprecated by the service: read `answer`.
    result: str | None
    output: Any = None
    stop_reason: str | None = None
    error_code: ErrorCode | None
    error_message: str | None
    usage: ChainMetrics
    user_id: str
    schedule_id: UUID | None = None
    replayed_from: UUID | None = None
    replay_report: ReplayReport | None = None
    forked_from: UUID | None = None
    fork_step: int | None = None
    # A sub-agent's task: the task (and call step) that started it, its family's first task.
    parent_task_id: UUID | None = None
    parent_step_id: UUID | None = None
    root_task_id: UUID | None = None
    depth: int = 0
    # A remote A2A agent's task as the service records it: the remote agent's name.
    remote_agent: str | None = None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    stream_url: str

    @property
    def is_finished(self) -> bool:
        return self.status in TERMINAL_STATES


class TaskPage(Page[Task]):
    api_schema = "TaskPage"


# Chains


class FailedAttempt(ApiModel):
    api_schema = "FailedAttempt"

    attempt: int
    error_class: str
    message: str
    deployment: str | None = None
    model: str | None = None
    status_code: int | None = None
    backoff_s: float | None = None


class ThinkingInfo(ApiModel):
    api_schema = "ThinkingInfo"

    thought: str
    confidence: float | None = None
    # A strategy's record (`thought`, `thought_scored`, `path_chosen`, `strategy_selected`...)
    # and its structured detail; absent from plain thoughts.
    event: str | None = None
    detail: dict[str, Any] | None = None


class ToolCallInfo(ApiModel):
    api_schema = "ToolCallInfo"

    tool_type: ToolType
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    correlation_id: UUID
    model: str | None = None
    provider: str | None = None
    prompt_tokens_estimate: int | None = None


class ToolResultInfo(ApiModel):
    api_schema = "ToolResultInfo"

    correlation_id: UUID
    tool_type: ToolType | None = None
    tool_name: str | None = None
    success: bool
    result: Any = None
    error: str | None = None
    error_code: ErrorCode | None = None
    duration_ms: float
    attempts: int = 1
    failed_attempts: list[FailedAttempt] = Field(default_factory=list)
    truncated: bool = False
    original_chars: int | None = None
    model: str | None = None
    provider: str | None = None
    deployment: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: Decimal | None = None
    unpriced: bool = False
    cached: bool = False
    # CPU seconds of a sandbox call.
    sandbox_s: float | None = None
    # A sub-agent call's result: the task and chain it started, the LLM calls of its family.
    child_task_id: UUID | None = None
    child_chain_id: UUID | None = None
    llm_calls: int | None = None
    # What the result brought into its run: "untrusted" content, "private" data.
    labels: list[str] = Field(default_factory=list)


class SynthesisInfo(ApiModel):
    api_schema = "SynthesisInfo"

    conclusion: str
    sources: list[UUID] = Field(default_factory=list)
    output: Any = None
    stop_reason: StopReason | None = None


class VisibilityConfig(ApiModel):
    api_schema = "VisibilityConfig"

    level: VisibilityLevel = "full"
    summary: str | None = None


class ReasoningStep(ApiModel):
    """A step as it was recorded (sensitive fields may be `[REDACTED]` for the reader):
    exactly the payload matching `type` is set."""

    api_schema = "ReasoningStep"

    id: UUID
    step_number: int
    type: StepType
    timestamp: datetime
    thinking: ThinkingInfo | None = None
    tool_call: ToolCallInfo | None = None
    tool_result: ToolResultInfo | None = None
    synthesis: SynthesisInfo | None = None
    visibility: VisibilityConfig = Field(default_factory=VisibilityConfig)
    parent_step_id: UUID | None = None
    copied_from: UUID | None = None


class SummaryVisibility(ApiModel):
    api_schema = "SummaryVisibility"

    level: Literal["summary"] = "summary"
    summary: str


class StepSummary(ApiModel):
    """A step the reader may see only as a summary."""

    api_schema = "StepSummary"

    id: UUID
    step_number: int
    type: StepType
    timestamp: datetime
    parent_step_id: UUID | None
    visibility: SummaryVisibility


_PAYLOADS = ("thinking", "tool_call", "tool_result", "synthesis")


def _step_of(data: Any) -> Any:
    """A step as served: whole (it carries its payload) or as its summary."""
    if not isinstance(data, dict):
        return data
    if any(data.get(name) is not None for name in _PAYLOADS):
        return ReasoningStep.model_validate(data)
    return StepSummary.model_validate(data)


Step = Annotated[ReasoningStep | StepSummary, BeforeValidator(_step_of)]
"""A step as the reader may see it: whole, or only as its summary."""


class Chain(ApiModel):
    api_schema = "ChainOut"

    id: UUID
    task_id: UUID
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
    # The chains of the sub-agents' tasks this chain's calls started.
    child_chain_ids: list[UUID] = Field(default_factory=list)
    steps: list[Step]


# Conversations


class Conversation(ApiModel):
    api_schema = "ConversationOut"

    id: UUID
    agent: str
    user_id: str
    metadata: dict[str, Any]
    file_ids: list[UUID]
    turn_count: int
    created_at: datetime
    updated_at: datetime


class Totals(ApiModel):
    api_schema = "Totals"

    turns: int
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    total_cost_usd: Decimal = Decimal(0)
    unpriced_calls: int


class Turn(ApiModel):
    api_schema = "TurnOut"

    turn: int
    task_id: UUID
    status: TaskState
    agent_version: int | None
    input: str | None = None
    messages: list[dict[str, Any]] | None = None
    answer: str | None
    # The old name of `answer`, deprecated by the service: read `answer`.
    result: str | None
    output: Any = None
    error_code: ErrorCode | None
    usage: ChainMetrics
    created_at: datetime
    finished_at: datetime | None
    stream_url: str


class ConversationDetail(Conversation):
    api_schema = "ConversationDetail"

    turns: list[Turn]
    totals: Totals


class ConversationPage(Page[Conversation]):
    api_schema = "ConversationPage"


# Agents


class Agent(ApiModel):
    """One version of an agent definition, and where the agent stands."""

    api_schema = "AgentOut"

    name: str
    version: int
    latest_version: int
    status: Literal["active", "archived"]
    builtin: bool = False
    kind: str = "react"
    # The strategies' options: `tot`, `mcts`, `plan`, `auto` (assess, table),
    # `min_confidence`.
    strategy: dict[str, Any] | None = None
    description: str | None = None
    instructions: str | None = None
    model: str | None = None
    # A cheaper model a run steps down to near its budget's limit.
    fallback_model: str | None = None
    tools: list[str] | None = None
    temperature: float | None = None
    max_iterations: int | None = None
    max_output_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    budget: Budget | None = None
    # How other agents call it as a sub-agent, and how it calls its own (by agent name).
    input_schema: dict[str, Any] | None = None
    sub_agents: dict[str, Any] = Field(default_factory=dict)
    on_limit: Literal["fail", "answer"] = "fail"
    # Which tool calls wait for a human: `tools` and `types` rules, `timeout_s`,
    # `submitter_decides`.
    approvals: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_by: str | None
    created_at: datetime
    version_created_by: str | None
    version_created_at: datetime
    archived_at: datetime | None = None


class AgentPage(Page[Agent]):
    api_schema = "AgentPage"


# Tools


class Tool(ApiModel):
    api_schema = "ToolOut"

    name: str
    type: ToolType
    description: str
    parameters: dict[str, Any]
    required_roles: list[str]
    idempotent: bool
    # Its results may carry text nobody in the tenant wrote (instructions not to obey).
    untrusted_output: bool
    # Its results hold data that is not public.
    private_output: bool
    # Whether a call can send data out: "none", "url" (where its URL argument points) or "any".
    egress: str
    usable: bool


class ToolList(ApiModel):
    api_schema = "ToolList"

    items: list[Tool]


# Costs


class Figures(ApiModel):
    api_schema = "Figures"

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    unpriced_calls: int
    # CPU seconds of sandbox calls (their cost is in cost_usd).
    sandbox_s: Decimal = Decimal(0)


class CostGroup(Figures):
    api_schema = "CostGroup"

    key: str | None
    split: str | None = None


class CostReport(ApiModel):
    api_schema = "CostReport"

    from_: datetime = Field(alias="from")
    to: datetime
    group_by: GroupBy | None
    split_by: GroupBy | None = None
    order: CostOrder = "key"
    currency: Literal["USD"] = "USD"
    groups: list[CostGroup]
    totals: Figures
    truncated: bool


class UsageDay(Figures):
    api_schema = "UsageDay"

    day: date
    model: str


class UsageModel(Figures):
    api_schema = "UsageModel"

    model: str


class UsageReport(ApiModel):
    api_schema = "UsageReport"

    from_: date = Field(alias="from")
    to: date
    currency: Literal["USD"] = "USD"
    days: list[UsageDay]
    models: list[UsageModel]
    totals: Figures


class TaskCost(ApiModel):
    api_schema = "TaskCost"

    # The task that made the call: the one asked about, or a sub-agent's task under it.
    task_id: UUID
    step_id: UUID
    tool_name: str
    tool_type: str
    model: str | None
    deployment: str | None
    provider: str | None
    user_id: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    unpriced: bool
    recorded_at: datetime
    # The strategy (agent kind) that made the call; None for calls recorded before.
    strategy: str | None = None
    # CPU seconds of a sandbox call; None for other calls.
    sandbox_s: Decimal | None = None


class TaskCosts(ApiModel):
    api_schema = "TaskCosts"

    task_id: UUID
    currency: Literal["USD"] = "USD"
    items: list[TaskCost]
    totals: Figures


class TenantRef(ApiModel):
    api_schema = "TenantRef"

    id: str
    name: str


class ApiKeyRef(ApiModel):
    api_schema = "ApiKeyRef"

    id: UUID
    name: str


class Me(ApiModel):
    """Who the caller is: its tenant, roles and permissions, and the API key it used."""

    api_schema = "Me"

    subject: str
    tenant: TenantRef
    roles: list[str]
    permissions: list[str]
    crosses_tenants: bool
    api_key: ApiKeyRef | None
