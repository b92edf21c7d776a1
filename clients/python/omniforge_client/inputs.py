"""What requests carry, as typed keyword arguments: the keys are the API's own field names
(a test holds them to the request schemas of `openapi/openapi.json`). A key left out is not
sent, so the service's default applies."""

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal, TypedDict
from uuid import UUID


class BudgetLimits(TypedDict, total=False):
    """Hard limits of a task (or the default of an agent's tasks); money as a `Decimal` or a
    decimal string keeps it exact."""

    max_cost_usd: Decimal | str | float
    max_tokens: int
    max_llm_calls: int
    max_steps: int
    max_duration_s: float
    max_sandbox_s: float


class TurnOptions(TypedDict, total=False):
    """How a task may run, besides its `input` or `messages` (and its conversation)."""

    model: str
    tools: Sequence[str]
    budget: BudgetLimits
    metadata: Mapping[str, Any]
    agent: str
    # The strategy of this task instead of its agent's: direct, cot, react, tot, mcts, plan, auto...
    kind: str
    stream_output: bool
    file_ids: Sequence[UUID | str]
    webhook_url: str


class TaskOptions(TurnOptions, total=False):
    """How a task may run, besides its `input` or `messages`."""

    conversation_id: UUID | str


class AgentDefinition(TypedDict, total=False):
    """The fields of an agent's version; unset ones behave as the built-in agent does."""

    description: str
    instructions: str
    kind: str
    strategy: Mapping[str, Any]
    model: str
    fallback_model: str
    tools: Sequence[str]
    temperature: float
    max_iterations: int
    max_output_tokens: int
    response_format: Mapping[str, Any]
    budget: BudgetLimits
    # Its arguments as another agent's sub-agent; how it calls its own (`agent:name` tools).
    input_schema: dict[str, Any]
    sub_agents: dict[str, Any]
    on_limit: Literal["fail", "answer"]
    approvals: Mapping[str, Any]
    metadata: Mapping[str, Any]


class AgentChanges(TypedDict, total=False):
    """Fields of an agent's newest version to change; `None` resets one to its default."""

    description: str | None
    instructions: str | None
    kind: str | None
    strategy: Mapping[str, Any] | None
    model: str | None
    fallback_model: str | None
    tools: Sequence[str] | None
    temperature: float | None
    max_iterations: int | None
    max_output_tokens: int | None
    response_format: Mapping[str, Any] | None
    budget: BudgetLimits | None
    input_schema: dict[str, Any] | None
    sub_agents: dict[str, Any] | None
    on_limit: Literal["fail", "answer"] | None
    approvals: Mapping[str, Any] | None
    metadata: Mapping[str, Any] | None
