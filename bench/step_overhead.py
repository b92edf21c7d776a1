"""Framework overhead per reasoning step: engine + executor + chain + event emission.

The LLM is replaced by an instant in-process model registered as the `llm` tool, so what is
measured is everything OmniForge does around a call: argument validation, guards (none here),
the two steps per call with metrics, the event queue, the ReAct loop. CPU time is process time.
"""

import asyncio
import gc
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.agents import AgentTask, ReActAgent
from app.chain import ToolType
from app.llm import LLMGateway, load_model_list
from app.tools.base import BaseTool
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry

LLM_PARAMETERS = {
    "type": "object",
    "properties": {
        "model": {"type": "string"},
        "messages": {"type": "array"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "max_tokens": {"type": "integer"},
        "temperature": {"type": "number"},
    },
}


class InstantLLM(BaseTool):
    """The `llm` tool answering at once with what `reply` makes of a call's arguments: a
    reply's value and the input tokens it counts."""

    _definition = ToolDefinition(
        name=LLM_TOOL_NAME, type=ToolType.LLM, description="instant", parameters=LLM_PARAMETERS
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def reply(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        raise NotImplementedError

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        value, input_tokens = self.reply(arguments)
        return ToolOutput(
            value,
            model="instant",
            provider="bench",
            deployment="instant",
            input_tokens=input_tokens,
            output_tokens=20,
            cost_usd=Decimal("0.000123"),
        )


class InstantModel(InstantLLM):
    """Answers at once: calls `noop` until `iterations` calls were made, then answers."""

    def __init__(self, iterations: int) -> None:
        self._iterations = iterations

    def reply(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        turn = sum(1 for m in arguments["messages"] if m["role"] == "tool")
        if turn < self._iterations:
            value: dict[str, Any] = {
                "content": f"Step {turn}: I will call the tool.",
                "tool_calls": [{"id": f"c{turn}", "name": "noop", "arguments": {"n": turn}}],
                "finish_reason": "tool_calls",
            }
        else:
            value = {"content": "Done.", "tool_calls": [], "finish_reason": "stop"}
        return value, 100 + turn


class NoopTool(BaseTool):
    _definition = ToolDefinition(
        name="noop",
        type=ToolType.SKILL,
        description="returns its argument",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput({"n": arguments["n"]})


@dataclass(frozen=True)
class StepOverhead:
    tasks: int
    steps: int
    events: int
    cpu_s: float
    wall_s: float

    @property
    def cpu_ms_per_step(self) -> float:
        return self.cpu_s * 1000 / self.steps

    @property
    def wall_ms_per_step(self) -> float:
        return self.wall_s * 1000 / self.steps


async def _measure(tasks: int, iterations: int) -> StepOverhead:
    registry = ToolRegistry([NoopTool(), InstantModel(iterations)])
    executor = ToolExecutor(registry)
    gateway = LLMGateway(load_model_list(None))  # only asked nothing: the mode is fixed
    agent = ReActAgent(
        executor, gateway, default_model="demo", mode="native", max_iterations=iterations + 1
    )
    steps = events = 0
    for _ in range(max(1, tasks // 10)):  # warm up caches and code paths
        async for _event in agent.process_task(AgentTask(input="bench")):
            pass
    # As the service does once start-up has built everything: what lives as long as the
    # process stays out of the collector's passes, so the figure is the steps' own cost, not
    # that of whatever else the process happened to import.
    gc.collect()
    gc.freeze()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(tasks):
        run = agent.start(AgentTask(input="bench"))
        async for _event in run.events():
            events += 1
        steps += len(run.chain.steps)
    return StepOverhead(tasks, steps, events, time.process_time() - cpu, time.perf_counter() - wall)


def run(tasks: int = 300, iterations: int = 10) -> StepOverhead:
    return asyncio.run(_measure(tasks, iterations))
