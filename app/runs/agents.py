"""Agent definitions as the service runs them: a stored version's definition, the built-in
default every tenant has, and how a task's `agent` reference (`name` or `name@N`) resolves."""

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncConnection

from app.agents.spec import AgentSpec
from app.chain import Budget
from app.runs.models import AGENT_REF_PATTERN, Metadata
from app.storage.agents import AgentRepository

DEFAULT_AGENT = "default"
"""Every tenant's built-in agent: the ReAct agent with the service's defaults, version 1."""


class AgentDefinition(AgentSpec):
    """What one version of an agent definition holds: how it runs (the spec), what it is
    for, the default budget of its tasks, and free metadata."""

    description: str | None = Field(default=None, max_length=4_000)
    budget: Budget | None = Field(
        default=None, description="The default budget of its tasks (a task may only narrow it)."
    )
    metadata: Metadata = Field(default_factory=dict)

    def spec(self) -> AgentSpec:
        return AgentSpec.model_validate(self.model_dump(include=set(AgentSpec.model_fields)))


BUILTIN_DEFINITION = AgentDefinition(
    description="The built-in ReAct agent: the service's default model, prompt and limits, "
    "and every tool its tenant enabled."
)


@dataclass(frozen=True, slots=True)
class ResolvedAgent:
    """The exact agent version a task runs."""

    name: str
    version: int
    definition: AgentDefinition
    id: UUID | None = None  # None: the built-in default
    archived: bool = False

    @property
    def ref(self) -> str:
        """`name@version`: what the task's chain records as its `agent_id`."""
        return f"{self.name}@{self.version}"


BUILTIN_AGENT = ResolvedAgent(DEFAULT_AGENT, 1, BUILTIN_DEFINITION)


class UnknownAgent(LookupError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"no agent {ref!r} in this tenant")
        self.ref = ref


class AgentArchived(Exception):
    """New tasks cannot run an archived agent (its old tasks keep their version)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"agent {name!r} is archived: it runs no new tasks (its past tasks and versions "
            "stay readable)"
        )
        self.name = name


def parse_ref(ref: str) -> tuple[str, int | None]:
    match = re.fullmatch(AGENT_REF_PATTERN, ref)
    if match is None:
        raise UnknownAgent(ref)
    name, _, version = ref.partition("@")
    return name, int(version) if version else None


async def resolve_agent(
    connection: AsyncConnection, tenant_id: str, ref: str | None
) -> ResolvedAgent:
    """The agent version `ref` names in the tenant (the built-in default for None):
    `UnknownAgent`, or `AgentArchived` for an archived agent."""
    if ref is None:
        return BUILTIN_AGENT
    name, version = parse_ref(ref)
    if name == DEFAULT_AGENT:
        if version not in (None, 1):
            raise UnknownAgent(ref)
        return BUILTIN_AGENT
    record = await AgentRepository(connection, tenant_id).get(name, version)
    if record is None:
        raise UnknownAgent(ref)
    if record.archived:
        raise AgentArchived(name)
    return ResolvedAgent(
        record.name,
        record.version,
        AgentDefinition.model_validate(record.definition),
        id=record.id,
    )


def definition_document(definition: AgentDefinition) -> dict[str, Any]:
    """A definition as stored: only what is set, in JSON types."""
    return definition.model_dump(mode="json", exclude_defaults=True)


async def agent_version(
    connection: AsyncConnection, tenant_id: str, name: str | None, version: int | None
) -> ResolvedAgent | None:
    """The exact agent version a stored task ran, archived or not (None when it is gone):
    what its run is resumed with. Tasks from before agents ran the built-in default."""
    if name is None or name == DEFAULT_AGENT:
        return BUILTIN_AGENT
    record = await AgentRepository(connection, tenant_id).get(name, version)
    if record is None or (version is not None and record.version != version):
        return None
    return ResolvedAgent(
        record.name,
        record.version,
        AgentDefinition.model_validate(record.definition),
        record.id,
        record.archived,
    )
