"""Agent definitions as the service runs them: a stored version's definition, the built-in
default every tenant has, what a tenant's runs can use (the rules the agents' service stores
definitions by), and how a task's `agent` reference (`name` or `name@N`) resolves."""

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sqlalchemy.ext.asyncio import AsyncConnection

from app.agents.spec import AgentSpec
from app.chain import Budget
from app.errors import OmniForgeError
from app.governance.tenants import Tenant
from app.resources.agents import DEFAULT_AGENT, AgentArchived, InvalidDefinition
from app.resources.agents.store import AgentRepository
from app.runs.models import AGENT_NAME_PATTERN, AGENT_REF_PATTERN, Metadata
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.errors import FieldError
from app.tools.registry import ToolRegistry
from app.tools.schemas import schema_problem, size_problem
from app.tools.subagents import is_sub_agent_ref, sub_agent_ref
from app.tools.subagents import tool_name as sub_agent_tool_name

if TYPE_CHECKING:
    from app.agents import AgentRuntime


class SubAgentPolicy(BaseModel):
    """How an agent calls one of its sub-agents."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: Budget | None = Field(
        default=None,
        description="The most of each budget one call gives the sub-agent's task. Whatever "
        "it says, a child gets no more than its caller has left, and the family never spends "
        "past the caller's budget.",
    )
    description: str | None = Field(
        default=None,
        min_length=1,
        max_length=4_000,
        description="What the model is told of the sub-agent (default: its description).",
    )


class AgentDefinition(AgentSpec):
    """What one version of an agent definition holds: how it runs (the spec), what it is
    for, the default budget of its tasks, how other agents call it, and free metadata."""

    description: str | None = Field(default=None, max_length=4_000)
    budget: Budget | None = Field(
        default=None, description="The default budget of its tasks (a task may only narrow it)."
    )
    input_schema: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Schema (an object) of the arguments other agents call it with as "
        "a sub-agent; its task's input is then the arguments as JSON. Unset: one `task` text.",
    )
    sub_agents: dict[str, SubAgentPolicy] = Field(
        default_factory=dict,
        max_length=128,
        description="By agent name: how it calls each sub-agent its `tools` list (`agent:name`).",
    )
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None:
            return None
        # Only what is cheap: whether it is a JSON Schema the service applies is checked
        # where a definition is stored, off the event loop (`check_definition`).
        too_large = size_problem(schema)
        if too_large is not None:
            raise ValueError(too_large)
        if schema.get("type") != "object":
            raise ValueError("must be a JSON Schema of type 'object'")
        return schema

    @model_validator(mode="after")
    def _policies_name_sub_agents(self) -> "AgentDefinition":
        listed = {sub_agent_ref(t).partition("@")[0] for t in self.sub_agent_entries}
        for name in self.sub_agents:
            if re.fullmatch(AGENT_NAME_PATTERN, name) is None or name not in listed:
                raise ValueError(
                    f"sub_agents names {name!r}, which its `tools` do not list as `agent:{name}`"
                )
        return self

    @property
    def sub_agent_entries(self) -> list[str]:
        """Its `tools` entries that name other agents (`agent:name[@N]`)."""
        return [entry for entry in self.tools or [] if is_sub_agent_ref(entry)]

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


class UnknownAgent(OmniForgeError, LookupError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"no agent {ref!r} in this tenant")
        self.ref = ref


def parse_ref(ref: str) -> tuple[str, int | None]:
    match = re.fullmatch(AGENT_REF_PATTERN, ref)
    if match is None:
        raise UnknownAgent(ref)
    name, _, version = ref.partition("@")
    return name, int(version) if version else None


def builtin_agent(ref: str | None) -> ResolvedAgent | None:
    """The built-in default agent when `ref` names it (None does too; `UnknownAgent` for a
    version of it that does not exist), None for any other agent: no read needed to know."""
    if ref is None:
        return BUILTIN_AGENT
    name, version = parse_ref(ref)
    if name != DEFAULT_AGENT:
        return None
    if version not in (None, 1):
        raise UnknownAgent(ref)
    return BUILTIN_AGENT


async def resolve_agent(
    connection: AsyncConnection, tenant_id: str, ref: str | None
) -> ResolvedAgent:
    """The agent version `ref` names in the tenant (the built-in default for None):
    `UnknownAgent`, or `AgentArchived` for an archived agent."""
    builtin = builtin_agent(ref)
    if builtin is not None:
        return builtin
    assert ref is not None
    name, version = parse_ref(ref)
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


def check_definition(
    runtime: "AgentRuntime",
    tenant: Tenant,
    definition: AgentDefinition,
    registry: ToolRegistry | None = None,
    *,
    name: str | None = None,
) -> None:
    """Refuses (`InvalidDefinition`) a definition naming what its tenant's runs could not use:
    a model that is not configured or not approved, a tool that is not registered (in
    `registry`, the tenant's tools; default the process's) or not enabled, a kind this process
    does not have, or a `response_format` or `input_schema` that is not a JSON Schema this
    service applies (or larger than `MAX_SCHEMA_BYTES`); or agent `name` as its own sub-agent
    (a longer cycle, through other agents, is refused when a call would close it). Checking a
    schema takes up to a few hundred milliseconds: call it in a worker thread."""
    registry = registry or runtime.registry
    problems: list[FieldError] = []
    if definition.kind not in runtime.kinds:
        known = ", ".join(runtime.kinds.names())
        problems.append(FieldError("kind", f"unknown kind {definition.kind!r} ({known})"))
    for field, model in (
        ("model", definition.model),
        ("fallback_model", definition.fallback_model),
    ):
        if model is None:
            continue
        configured = runtime.gateway.model_names()
        if model not in configured:
            message = f"unknown model {model!r}; available: {', '.join(configured)}"
            problems.append(FieldError(field, message))
        elif not tenant.models.approves(model):
            problems.append(FieldError(field, f"{model!r} is not approved for this tenant"))
    enabled = tenant.enabled_tools
    seen: set[str] = set()
    for index, entry in enumerate(definition.tools or []):
        field = f"tools.{index}"
        if is_sub_agent_ref(entry):
            tool = sub_agent_tool_name(entry)
            if name is not None and tool == sub_agent_tool_name(f"agent:{name}"):
                message = f"{entry!r} is this agent itself: an agent may not call itself"
                problems.append(FieldError(field, message))
            elif tool in seen:
                problems.append(FieldError(field, f"{entry!r} is listed twice"))
            seen.add(tool)
            continue
        if entry == LLM_TOOL_NAME or entry not in registry:
            problems.append(FieldError(field, f"unknown tool {entry!r}"))
        elif enabled is not None and entry not in enabled:
            problems.append(FieldError(field, f"{entry!r} is not enabled for this tenant"))
        elif entry in seen:
            problems.append(FieldError(field, f"{entry!r} is listed twice"))
        seen.add(entry)
    for field, schema in (
        ("response_format", definition.response_format),
        ("input_schema", definition.input_schema),
    ):
        if schema is not None:
            reason = size_problem(schema) or schema_problem(schema)
            if reason is not None:
                problems.append(FieldError(field, reason))
    if problems:
        raise InvalidDefinition("the definition names what this tenant cannot run", problems)


@dataclass(frozen=True, slots=True)
class RunnableDefinitions:
    """The rules the agents' service stores definitions by: a document is an
    `AgentDefinition`, naming only what `runtime` can run for its tenant."""

    runtime: "AgentRuntime"

    def document(self, given: dict[str, Any]) -> dict[str, Any]:
        try:
            definition = AgentDefinition.model_validate(given)
        except ValidationError as exc:
            raise _invalid(exc) from None
        return definition_document(definition)

    def check(
        self,
        tenant: Tenant,
        document: dict[str, Any],
        registry: ToolRegistry | None,
        *,
        name: str,
    ) -> None:
        definition = AgentDefinition.model_validate(document)
        check_definition(self.runtime, tenant, definition, registry, name=name)


def _invalid(exc: ValidationError) -> InvalidDefinition:
    problems = [
        FieldError(".".join(str(part) for part in error["loc"]), error["msg"])
        for error in exc.errors()
    ]
    return InvalidDefinition("the definition is not valid; see `errors`", problems)
