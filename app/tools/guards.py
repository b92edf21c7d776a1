"""The guard protocol: limits, budgets and policies plug into the executor here."""

from dataclasses import dataclass, field
from typing import Any, Protocol

from app.chain import ReasoningStep, ToolResultInfo
from app.tools.base import BaseTool
from app.tools.models import CallEstimate, ToolCallContext, ToolDefinition


@dataclass(slots=True)
class PendingCall:
    """A validated tool call about to run (before_call) or just finished (after_call)."""

    tool: BaseTool
    definition: ToolDefinition
    arguments: dict[str, Any]
    context: ToolCallContext
    call_step: ReasoningStep
    _estimate: CallEstimate | None = field(default=None, init=False)
    _estimated: bool = field(default=False, init=False)

    async def estimate(self) -> CallEstimate | None:
        """The tool's pre-call estimate, computed once on first use."""
        if not self._estimated:
            self._estimate = await self.tool.estimate(self.arguments, self.context)
            self._estimated = True
        return self._estimate


class ToolGuard(Protocol):
    """Called by the executor around every tool call, in registration order.

    `before_call` raises `GuardRejection` to refuse a call (it is then recorded as failed and
    not executed); `after_call` sees the recorded result with its real usage and may raise
    `GuardRejection` to end the run. A call a guard let through gets exactly one of
    `after_call` and `abandon`: the latter when the call never finished (cancelled) or a later
    guard refused it, so that what `before_call` reserved is given back. `abandon` must not
    block (it may schedule work).
    """

    async def before_call(self, call: PendingCall) -> None: ...

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None: ...

    def abandon(self, call: PendingCall) -> None: ...
