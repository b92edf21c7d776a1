"""Agents as tools: a definition that lists `agent:<name>[@N]` gets a tool of type `sub_agent`
that runs that agent on a task of its own (a child task and chain, linked to the call) and
answers with the child's answer. The service runs the child (`Delegation`); this module is
the tool's side of it."""

import json
from dataclasses import dataclass
from typing import Any, Protocol

from app.chain import Budget, ToolType
from app.chain.models import DataLabel
from app.tools.base import BaseTool
from app.tools.models import ChildRun, Egress, ToolCallContext, ToolDefinition, ToolOutput

SUB_AGENT_PREFIX = "agent:"
SUB_AGENT_REF_PATTERN = r"^agent:[a-z][a-z0-9_-]{0,56}(@[1-9][0-9]{0,8})?$"
"""How a definition's `tools` names another agent of its tenant: `agent:name` (its newest
version when the run starts) or `agent:name@N`. Names of at most 57 characters, so the tool
name (`agent__name`) fits a model's 64."""
TOOL_PREFIX = "agent__"

DEFAULT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "description": "What the agent is to do, in full: it sees nothing else of this "
            "conversation.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""What an agent without an `input_schema` is called with."""

SUB_AGENT_TIMEOUT_S = 3600.0


def is_sub_agent_ref(entry: str) -> bool:
    return entry.startswith(SUB_AGENT_PREFIX)


def sub_agent_ref(entry: str) -> str:
    """`agent:name@2` -> `name@2`."""
    return entry[len(SUB_AGENT_PREFIX) :]


def tool_name(entry: str) -> str:
    """The tool a model calls for `agent:name[@N]`: `agent__name`."""
    return TOOL_PREFIX + sub_agent_ref(entry).partition("@")[0]


@dataclass(frozen=True, slots=True)
class SubAgentCall:
    """One call of a sub-agent tool: which agent (`name` or `name@N`), the child task's input,
    the most of each budget the call may give it (`cap`), and the call's context (its task,
    chain and step: the child's parent)."""

    agent: str
    input: str
    cap: Budget | None
    context: ToolCallContext


@dataclass(frozen=True, slots=True)
class SubAgentAnswer:
    """A child task that completed: its answer (and `output`, for an agent with a
    `response_format`), and the child with what its family used."""

    child: ChildRun
    answer: str | None
    output: Any = None
    stop_reason: str | None = None
    # What the child's run read (`app.tools.dataflow`): its answer may carry it.
    labels: frozenset[DataLabel] = frozenset()


class Delegation(Protocol):
    """Runs a sub-agent's task for a call of one run: starts it (or, for a call its resumed
    parent makes again, finds the one it started and resumes or awaits it) and returns once it
    ended. A child that did not complete raises `ToolError` naming it (`child` set), so its
    failure is an observation of the parent; cancelling the call cancels the child."""

    async def delegate(self, call: SubAgentCall) -> SubAgentAnswer: ...


class SubAgentTool(BaseTool):
    """Another agent of the tenant, as a tool of one run. With a `parameters` schema of its
    own (the agent's `input_schema`), the child's input is the arguments as JSON; else it is
    the `task` argument."""

    def __init__(
        self,
        entry: str,
        description: str,
        delegation: Delegation,
        *,
        parameters: dict[str, Any] | None = None,
        cap: Budget | None = None,
    ) -> None:
        self._agent = sub_agent_ref(entry)
        self._delegation = delegation
        self._cap = cap
        self._free_form = parameters is None
        self._definition = ToolDefinition(
            name=tool_name(entry),
            type=ToolType.SUB_AGENT,
            description=description,
            parameters=DEFAULT_PARAMETERS if parameters is None else parameters,
            returns_description="The agent's answer.",
            timeout_s=SUB_AGENT_TIMEOUT_S,
            # A resumed parent's call finds the child it started (the child's id derives from
            # the call) and resumes it: nothing is done twice.
            idempotent=True,
            # Its run starts without its caller's labels: what it is told could leave
            # through its own tools unchecked, so the call itself counts as a way out. Its
            # answer brings back what its run read (`SubAgentAnswer.labels`).
            egress=Egress.ANY,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def agent(self) -> str:
        return self._agent

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        text = (
            str(arguments["task"])
            if self._free_form
            else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        )
        answer = await self._delegation.delegate(
            SubAgentCall(self._agent, text, self._cap, context)
        )
        value: Any = answer.answer if answer.output is None else answer.output
        return ToolOutput(value=value, child=answer.child, labels=answer.labels)
