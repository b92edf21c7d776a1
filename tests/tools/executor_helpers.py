"""Tools, guards and an executor for the executor tests (test_executor_*.py)."""

import asyncio
from decimal import Decimal
from typing import Any

from app.chain import ToolResultInfo, ToolType
from app.tools.base import BaseTool
from app.tools.errors import GuardRejection
from app.tools.executor import ToolExecutor
from app.tools.guards import PendingCall
from app.tools.models import CallEstimate, RetryPolicy, ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry

_OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class EchoTool(BaseTool):
    """Returns its `text`; with `usage`, reports tokens and cost like an LLM would."""

    def __init__(self, name: str = "echo", *, usage: bool = False) -> None:
        self._definition = ToolDefinition(
            name=name, type=ToolType.SKILL, description="echoes", parameters=_OBJECT
        )
        self._usage = usage
        self.calls: list[dict[str, Any]] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.calls.append(arguments)
        if not self._usage:
            return ToolOutput(arguments["text"])
        return ToolOutput(
            arguments["text"],
            model="m",
            deployment="m#1",
            input_tokens=10,
            output_tokens=4,
            cost_usd=Decimal("0.00007"),
        )

    async def estimate(self, arguments: dict[str, Any], context: ToolCallContext) -> CallEstimate:
        return CallEstimate(input_tokens=10, max_output_tokens=100, cost_usd=Decimal("0.001"))


class ScriptedTool(BaseTool):
    """Raises the scripted errors in turn, then succeeds."""

    def __init__(self, errors: list[Exception], retry: RetryPolicy, timeout_s: float = 5) -> None:
        self._errors = list(errors)
        self._definition = ToolDefinition(
            name="flaky",
            type=ToolType.EXTERNAL,
            description="fails first",
            retry=retry,
            timeout_s=timeout_s,
        )
        self.attempts: list[int] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.attempts.append(context.attempt)
        if self._errors:
            raise self._errors.pop(0)
        return ToolOutput("fine")


class BlockingTool(BaseTool):
    """Signals that it started, then waits for `release` (forever unless released)."""

    def __init__(self, name: str = "blocking", *, timeout_s: float = 30) -> None:
        self._definition = ToolDefinition(
            name=name, type=ToolType.EXTERNAL, description="waits", timeout_s=timeout_s
        )
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return ToolOutput(self.definition.name)


def _executor(*tools: BaseTool, **options: Any) -> ToolExecutor:
    return ToolExecutor(ToolRegistry(list(tools)), **options)


class RecordingGuard:
    def __init__(self, reject: GuardRejection | None = None, *, after: bool = False) -> None:
        self.reject = reject
        self.reject_after = after
        self.before: list[str] = []
        self.after: list[ToolResultInfo] = []
        self.abandoned: list[str] = []
        self.estimates: list[CallEstimate | None] = []

    async def before_call(self, call: PendingCall) -> None:
        self.before.append(call.definition.name)
        self.estimates.append(await call.estimate())
        self.estimates.append(await call.estimate())
        if self.reject is not None and not self.reject_after:
            raise self.reject

    async def after_call(self, call: PendingCall, result: ToolResultInfo) -> None:
        self.after.append(result)
        if self.reject is not None and self.reject_after:
            raise self.reject

    def abandon(self, call: PendingCall) -> None:
        self.abandoned.append(call.definition.name)
