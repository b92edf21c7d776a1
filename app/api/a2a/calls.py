"""One A2A request as the routes authenticated it, handed to the handler through the SDK's
call context. Light: the routes import it at start-up, the SDK's server side only on the
first A2A request (`app.api.a2a.bindings`)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from app.api.a2a.errors import task_not_found
from app.api.state import AppState
from app.governance.callers import Caller
from app.resources.agents import DEFAULT_AGENT
from app.runs.agents import ResolvedAgent
from app.storage.records import TaskRecord

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

CALL_KEY = "omniforge.a2a"
"""Where the route leaves its `A2ACall`: in the request's scope, then the call context."""


@dataclass(frozen=True, slots=True)
class A2ACall:
    """One A2A request: the service, the authenticated caller, the agent its path names."""

    state: AppState
    caller: Caller
    agent: ResolvedAgent

    @classmethod
    def of(cls, context: "ServerCallContext") -> "A2ACall":
        call = context.state.get(CALL_KEY)
        assert isinstance(call, A2ACall), "the A2A routes set the call before dispatching"
        return call

    async def task(self, task_id: str) -> TaskRecord:
        """The caller's task of this agent; any other is not found."""
        try:
            task = await self.state.tasks.find(self.caller, UUID(task_id))
        except ValueError:
            raise task_not_found(task_id) from None
        if (task.agent_name or DEFAULT_AGENT) != self.agent.name:
            raise task_not_found(task_id)
        return task
