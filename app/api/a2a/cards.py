"""An agent's A2A card: who it is, where it is served (JSON-RPC and HTTP+JSON), what it can
do (its tools as skills), how to authenticate (our bearer tokens), and the extension it
speaks."""

from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from app.api.a2a.mapping import TEXT
from app.chain import ToolType
from app.governance.tenants import Tenant
from app.runs.agents import ResolvedAgent
from app.tools.a2a.extension import EXTENSION_URI
from app.tools.registry import ToolRegistry
from app.tools.subagents import is_sub_agent_ref, sub_agent_ref

A2A_PREFIX = "/a2a/v1"
AGENT_PATH = "/tenants/{tenant_id}/agents/{agent_name}"
CARD_PATH = "/.well-known/agent-card.json"
BEARER = "bearer"

_EXTENSION = (
    "Usage and cost: every Task, TaskStatusUpdateEvent and TaskArtifactUpdateEvent carries, "
    "under metadata[<this uri>], the tokens, LLM calls and USD cost (a decimal string) of "
    "the task so far. Resumable subscriptions: every streamed event carries `event_id`; "
    "SubscribeToTask with the HTTP header `Last-Event-ID: <event_id>` sends exactly the "
    "events after it, then the live ones."
)


def agent_url(base_url: str, tenant_id: str, agent_name: str) -> str:
    """Where an agent is served: JSON-RPC is POSTed here, HTTP+JSON lives under it."""
    path = AGENT_PATH.format(tenant_id=tenant_id, agent_name=agent_name)
    return f"{base_url.rstrip('/')}{A2A_PREFIX}{path}"


def agent_card(
    base_url: str, tenant: Tenant, agent: ResolvedAgent, registry: ToolRegistry
) -> a2a.AgentCard:
    url = agent_url(base_url, tenant.id, agent.name)
    definition = agent.definition
    return a2a.AgentCard(
        name=agent.name,
        description=definition.description or f"The agent {agent.name} of {tenant.id}.",
        version=str(agent.version),
        supported_interfaces=[
            a2a.AgentInterface(
                url=url, protocol_binding=binding, protocol_version=PROTOCOL_VERSION_1_0
            )
            for binding in (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
        ],
        provider=a2a.AgentProvider(organization=tenant.record.name, url=base_url),
        capabilities=a2a.AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=[
                a2a.AgentExtension(uri=EXTENSION_URI, description=_EXTENSION, required=False)
            ],
        ),
        security_schemes={
            BEARER: a2a.SecurityScheme(
                http_auth_security_scheme=a2a.HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="JWT or OmniForge API key",
                    description="The same bearer token as the OmniForge REST API.",
                )
            )
        },
        security_requirements=[a2a.SecurityRequirement(schemes={BEARER: a2a.StringList()})],
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=skills(agent, tenant, registry),
    )


def skills(agent: ResolvedAgent, tenant: Tenant, registry: ToolRegistry) -> list[a2a.AgentSkill]:
    """The agent's tools (every tool its tenant enabled when it names none) as skills; an
    agent with no tools at all has one skill: answering."""
    listed = agent.definition.tools
    enabled = tenant.enabled_tools
    found: list[a2a.AgentSkill] = []
    for definition in registry.list_tools():
        if definition.type is ToolType.LLM:
            continue
        if listed is None and enabled is not None and definition.name not in enabled:
            continue
        if listed is not None and definition.name not in listed:
            continue
        found.append(
            a2a.AgentSkill(
                id=definition.name,
                name=definition.name,
                description=definition.description,
                tags=[str(definition.type)],
            )
        )
    for entry in listed or []:
        if is_sub_agent_ref(entry):
            name = sub_agent_ref(entry).partition("@")[0]
            policy = agent.definition.sub_agents.get(name)
            found.append(
                a2a.AgentSkill(
                    id=entry,
                    name=entry,
                    description=(policy and policy.description) or f"Delegates to agent {name}.",
                    tags=[str(ToolType.SUB_AGENT)],
                )
            )
    if not found:
        found.append(
            a2a.AgentSkill(
                id="answer",
                name="answer",
                description="Answers a text message.",
                tags=["answer"],
            )
        )
    return found
