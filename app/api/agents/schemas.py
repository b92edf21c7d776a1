"""Agent definitions as clients send and see them."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.agents.spec import AgentApprovals, OnLimit, StrategyOptions, ToolEntry
from app.api.query import encode_key_cursor
from app.chain import Budget
from app.resources.agents import DEFAULT_AGENT, AgentListing, AgentVersion, BuiltinVersion
from app.runs.agents import BUILTIN_DEFINITION, AgentDefinition, SubAgentPolicy
from app.runs.models import AgentName, Metadata

AgentStatus = Literal["active", "archived"]


class AgentCreate(AgentDefinition):
    """A new agent: its name, and the definition of its version 1."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "support",
                    "description": "Answers billing questions.",
                    "instructions": "You answer questions about invoices. Be brief.",
                    "tools": ["calculator"],
                    "temperature": 0.2,
                    "budget": {"max_cost_usd": "0.50"},
                }
            ]
        }
    )

    name: AgentName

    def definition(self) -> AgentDefinition:
        return AgentDefinition.model_validate(self.fields())

    def fields(self) -> dict[str, Any]:
        """Its definition's fields, without its name."""
        return self.model_dump(exclude={"name"})


class AgentUpdate(BaseModel):
    """Fields of the newest version to change; `null` resets one to its default. The
    definition they make together is checked as a whole, as on create. A change that leaves
    the definition as it was creates no version."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    instructions: str | None = None
    kind: str | None = None
    strategy: StrategyOptions | None = None
    model: str | None = None
    fallback_model: str | None = None
    tools: list[ToolEntry] | None = None
    temperature: float | None = None
    max_iterations: int | None = None
    max_output_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    budget: Budget | None = None
    input_schema: dict[str, Any] | None = None
    sub_agents: dict[str, SubAgentPolicy] | None = None
    on_limit: OnLimit | None = None
    approvals: AgentApprovals | None = None
    metadata: Metadata | None = None

    def applied_to(self, current: dict[str, Any]) -> dict[str, Any]:
        """`current` (a stored definition document) with these changes: a field set to null
        is dropped, so that it takes its default."""
        document = dict(current)
        for name in self.model_fields_set:
            value = getattr(self, name)
            if value is None:
                document.pop(name, None)
            else:
                document[name] = (
                    value.model_dump(mode="json", exclude_none=True)
                    if isinstance(value, BaseModel)
                    else value
                )
        return document


class AgentOut(AgentDefinition):
    """One version of an agent: its definition, and where it stands."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    version: int = Field(description="The version shown.")
    latest_version: int = Field(description="The newest version: what tasks naming it run.")
    status: AgentStatus = Field(description="An `archived` agent runs no new tasks.")
    builtin: bool = Field(
        default=False, description="The built-in `default` agent: read-only, never archived."
    )
    created_by: str | None = Field(description="Who created the agent (null: built in).")
    created_at: datetime
    version_created_by: str | None = Field(description="Who created this version.")
    version_created_at: datetime
    archived_at: datetime | None = None

    @classmethod
    def of(cls, record: AgentVersion) -> "AgentOut":
        if isinstance(record, BuiltinVersion):
            return cls.builtin_of(since=record.since)
        return cls.model_validate(
            {
                **record.definition,
                "name": record.name,
                "version": record.version,
                "latest_version": record.latest_version,
                "status": record.status,
                "created_by": record.created_by,
                "created_at": record.created_at,
                "version_created_by": record.version_created_by,
                "version_created_at": record.version_created_at,
                "archived_at": record.archived_at,
            }
        )

    @classmethod
    def builtin_of(cls, *, since: datetime) -> "AgentOut":
        """The built-in agent, which exists since its tenant does."""
        return cls.model_validate(
            {
                **BUILTIN_DEFINITION.model_dump(),
                "name": DEFAULT_AGENT,
                "version": 1,
                "latest_version": 1,
                "status": "active",
                "builtin": True,
                "created_by": None,
                "created_at": since,
                "version_created_by": None,
                "version_created_at": since,
            }
        )


class AgentPage(BaseModel):
    items: list[AgentOut]
    next_cursor: str | None

    @classmethod
    def of(cls, listing: AgentListing[str] | AgentListing[int]) -> "AgentPage":
        after = listing.after
        return cls(
            items=[AgentOut.of(item) for item in listing.items],
            next_cursor=None if after is None else encode_key_cursor(after),
        )
