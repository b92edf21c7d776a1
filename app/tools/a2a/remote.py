"""The skills of a tenant's remote A2A agent as tools of type `sub_agent`: each skill of its card
becomes `<agent>__<skill>` (named as MCP tools are), called with one message. A call records
the remote task's updates as they stream, as steps of a task and chain of its own under the
call (a sub-agent's, as the run's stream and console show it; as progress reports where the
run has no store), answers with the remote's answer and what it reported it used, and
cancels the remote task when the call is cancelled.

Names are derived from the stored card, not stored, so that renaming the agent renames its
tools."""

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from a2a.types import AgentCard

from app.chain import ToolType
from app.tools.a2a.cards import Origin
from app.tools.a2a.client import A2AConnector, RemoteAnswer
from app.tools.base import BaseTool
from app.tools.errors import ToolError
from app.tools.mcp.discovery import tool_name
from app.tools.models import ChildRun, Egress, ToolCallContext, ToolDefinition, ToolOutput
from app.tools.services import NO_SERVICES, SecretUse, ToolServices, resolve_headers

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
    `connector` at `origin` alone (its card URL's, whatever the card names) with `headers`
    (text, or `{"secret": NAME}` resolved from the run's secrets at each call) and the run's
    network policy."""

    def __init__(
        self,
        connector: A2AConnector,
        *,
        agent: str,
        card: AgentCard,
        origin: Origin,
        skill: RemoteSkill,
        headers: Mapping[str, Any],
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self._connector = connector
        self._agent = agent
        self._card = card
        self._origin = origin
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
            # Another service's agent answers; what it is told is out of our hands. What a
            # tenant secret opens is not public.
            untrusted_output=True,
            private_output=any(isinstance(value, Mapping) for value in headers.values()),
            egress=Egress.ANY,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        services = context.services or NO_SERVICES
        use = SecretUse.in_call(context, "remote_agent", self._agent)
        lookup = None if services.secrets is None else partial(services.secrets.resolve, use=use)
        headers = await resolve_headers(self._headers, lookup)
        message = str(arguments["message"])
        # The remote learns which task calls it: a message that comes back to this service
        # is then found to be one of its own tasks' (a cycle, or one hop too deep).
        hops = [context.task_id]
        if services.trails is None:  # no store behind the run: its updates as progress
            answer = await self._call(message, services, headers, hops, context.progress)
            return _output(answer, None)
        async with services.trails.open(context, self._agent, message) as trail:
            try:
                answer = await self._call(message, services, headers, hops, trail.note)
            except ToolError as exc:  # its failed result names the task that recorded it
                exc.child = exc.child or trail.child
                raise
            trail.answer(answer.text)
        return _output(answer, trail.child)

    async def _call(
        self,
        message: str,
        services: ToolServices,
        headers: dict[str, str],
        hops: list[str],
        note: Callable[[str], None],
    ) -> RemoteAnswer:
        return await self._connector.call(
            self._card,
            message,
            agent=self._agent,
            origin=self._origin,
            network=services.network,
            headers=headers,
            trail=hops,
            on_update=lambda update: note(update.describe()),
        )


def _output(answer: RemoteAnswer, child: ChildRun | None) -> ToolOutput:
    """The call's output: the remote's answer, with what it reported it used (an unknown cost
    where it reported nothing), naming the task that recorded its updates."""
    usage = answer.usage
    if usage is None:
        return ToolOutput(answer.text, unpriced=True, child=child)
    if child is not None:
        child = dataclasses.replace(child, llm_calls=usage.llm_calls)
    return ToolOutput(
        answer.text,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        unpriced=usage.unpriced_calls > 0,
        child=child,
    )
