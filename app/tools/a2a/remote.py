"""The skills of a tenant's remote A2A agent as tools of type `sub_agent`: each skill of its card
becomes `<agent>__<skill>` (named as MCP tools are), called with one message. A call streams
the remote task's updates into the chain as progress reports, answers with the remote's
answer and what it reported it used, and cancels the remote task when the call is cancelled.

Names are derived from the stored card, not stored, so that renaming the agent renames its
tools."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import AgentCard

from app.chain import ToolType
from app.tools.a2a.client import A2AConnector
from app.tools.base import BaseTool
from app.tools.mcp.discovery import tool_name
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.services import NO_SERVICES, resolve_headers

CALL_TIMEOUT_S = 600.0
"""How long one call may take: a remote agent's task may run long."""
MAX_DESCRIPTION_CHARS = 1024

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "minLength": 1,
            "description": "What to ask the remote agent, in full: it sees nothing else of "
            "this conversation.",
        }
    },
    "required": ["message"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class RemoteSkill:
    """A skill of a remote agent's card, with its tool's name and description."""

    skill_id: str
    tool: str
    description: str


def skills_of(agent: str, card: AgentCard) -> tuple[list[RemoteSkill], list[tuple[str, str]]]:
    """The skills of `agent`'s card as tools, and those that get none, each with why (a name
    with no character a tool name may hold, or one another skill's name also becomes)."""
    candidates: list[tuple[str, str, str]] = []
    skipped: list[tuple[str, str]] = []
    for skill in card.skills:
        name = tool_name(agent, skill.id)
        if name is None:
            skipped.append((skill.id, "its id has no character a tool name may hold"))
            continue
        about = skill.description.strip() or skill.name.strip() or skill.id
        if card.description.strip():
            about += f" (a skill of the remote agent {card.name}: {card.description.strip()})"
        candidates.append((skill.id, name, about[:MAX_DESCRIPTION_CHARS]))
    counts = Counter(name for _, name, _ in candidates)
    skills: list[RemoteSkill] = []
    for skill_id, name, about in candidates:
        if counts[name] == 1:
            skills.append(RemoteSkill(skill_id, name, about))
        else:
            skipped.append((skill_id, f"its tool name {name!r} would also be another skill's"))
    return skills, skipped


class RemoteAgentTool(BaseTool):
    """One skill of the remote agent named `agent` (its `card` as stored), reached through
    `connector` with `headers` (text, or `{"secret": NAME}` resolved from the run's secrets
    at each call) and the run's network policy."""

    def __init__(
        self,
        connector: A2AConnector,
        *,
        agent: str,
        card: AgentCard,
        skill: RemoteSkill,
        headers: Mapping[str, Any],
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self._connector = connector
        self._agent = agent
        self._card = card
        self._headers = dict(headers)
        self.skill_id = skill.skill_id
        self._definition = ToolDefinition(
            name=skill.tool,
            type=ToolType.SUB_AGENT,
            description=skill.description,
            parameters=PARAMETERS,
            returns_description="The remote agent's answer.",
            timeout_s=timeout_s,
            # A remote task has effects we cannot see: never sent twice.
            idempotent=False,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        services = context.services or NO_SERVICES
        lookup = None if services.secrets is None else services.secrets.resolve
        headers = await resolve_headers(self._headers, lookup)
        answer = await self._connector.call(
            self._card,
            str(arguments["message"]),
            agent=self._agent,
            network=services.network,
            headers=headers,
            on_update=lambda update: context.progress(update.describe()),
        )
        usage = answer.usage
        if usage is None:  # it reports nothing it used: a call of unknown cost
            return ToolOutput(answer.text, unpriced=True)
        return ToolOutput(
            answer.text,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
            unpriced=usage.unpriced_calls > 0,
        )
