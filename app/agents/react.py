"""The autonomous ReAct agent: the model decides every step until it gives a final answer."""

import json
from typing import Any, Literal
from uuid import UUID

from app.agents.base import CoTAgent
from app.agents.engine import LLMCallResult, ReasoningEngine
from app.agents.models import AgentTask
from app.agents.parser import parse_react
from app.agents.prompts import FORMAT_REMINDER, NATIVE_SYSTEM_PROMPT, text_system_prompt
from app.chain import ErrorCode
from app.chain.errors import ChainAbort
from app.llm import LLMGateway
from app.tools.executor import ToolExecutor
from app.tools.results import ToolInvocation, ToolResult

ToolCallingMode = Literal["auto", "native", "text"]


class ReActAgent(CoTAgent):
    """Thought → action → observation, repeated. Uses the model's native tool calling when
    LiteLLM says every deployment of the model supports it (`mode="auto"`), the text ReAct
    format otherwise. Tool failures go back to the model as observations; the final answer
    becomes a synthesis step citing the tool results and the answering LLM call.

    A final answer that is nothing but the error of one of the run's failed tool calls (a
    model echoing its observation) fails the chain with that call's error code: a failed tool
    result is never the answer of a completed task. Only a verbatim echo is caught; an answer
    that explains a failure in its own words is the model's to give."""

    agent_id = "react"

    def __init__(
        self,
        executor: ToolExecutor,
        gateway: LLMGateway,
        *,
        default_model: str,
        max_iterations: int = 10,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        mode: ToolCallingMode = "auto",
    ) -> None:
        super().__init__(executor, default_model=default_model, max_output_tokens=max_output_tokens)
        self.gateway = gateway
        self.max_iterations = max_iterations
        self.temperature = temperature
        self.mode = mode

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        native = self.mode == "native" or (
            self.mode == "auto" and self.gateway.supports_native_tools(engine.default_model)
        )
        if native:
            await self._reason_native(task, engine)
        else:
            await self._reason_text(task, engine)

    async def _reason_native(self, task: AgentTask, engine: ReasoningEngine) -> None:
        tools = [definition.name for definition in engine.available_tools()]
        messages = [{"role": "system", "content": NATIVE_SYSTEM_PROMPT}, *task.conversation()]
        sources: list[UUID] = []
        failures: dict[str, ToolResult] = {}
        for _ in range(self.max_iterations):
            reply = await self._call_llm(engine, messages, tools=tools)
            calls = reply.tool_calls
            if not calls:
                _conclude(engine, reply.content or "", [*sources, reply.step_id], failures)
                return
            if reply.content:
                engine.add_thinking(reply.content, parent_step_id=reply.step_id)
            results = await engine.call_tools(
                [ToolInvocation(call.name, call.arguments) for call in calls],
                parent_step_id=reply.step_id,
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.content,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": _json(call.arguments)},
                        }
                        for call in calls
                    ],
                }
            )
            for call, result in zip(calls, results, strict=True):
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": observation(result)}
                )
                if result.success:
                    sources.append(result.result_step.id)
                else:
                    _remember_failure(failures, result)
        self._give_up()

    async def _reason_text(self, task: AgentTask, engine: ReasoningEngine) -> None:
        tools = engine.available_tools()
        messages = [{"role": "system", "content": text_system_prompt(tools)}, *task.conversation()]
        sources: list[UUID] = []
        failures: dict[str, ToolResult] = {}
        for _ in range(self.max_iterations):
            reply = await self._call_llm(engine, messages, stop=["\nObservation:"])
            content = reply.content or ""
            step = parse_react(content)
            if step.thought:
                engine.add_thinking(step.thought, parent_step_id=reply.step_id)
            if step.final_answer is not None:
                _conclude(engine, step.final_answer, [*sources, reply.step_id], failures)
                return
            messages.append({"role": "assistant", "content": content})
            if step.action is None:
                messages.append(
                    {"role": "user", "content": FORMAT_REMINDER.format(problem=step.error)}
                )
                continue
            result = await engine.call_tool(
                step.action,
                _coerce(step.action_input, engine, step.action),
                parent_step_id=reply.step_id,
            )
            if result.success:
                sources.append(result.result_step.id)
            else:
                _remember_failure(failures, result)
            messages.append({"role": "user", "content": f"Observation: {observation(result)}"})
        self._give_up()

    async def _call_llm(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        *,
        tools: list[str] | None = None,
        stop: list[str] | None = None,
    ) -> LLMCallResult:
        reply = await engine.call_llm(
            messages=messages, tools=tools, temperature=self.temperature, stop=stop
        )
        if not reply.success:
            info = reply.result.info
            raise ChainAbort(
                ErrorCode.LLM_ERROR,
                f"the model call failed after {info.attempts} attempt(s): "
                f"{info.error_code}: {info.error}",
            )
        return reply

    def _give_up(self) -> None:
        raise ChainAbort(
            ErrorCode.MAX_ITERATIONS,
            f"no final answer after {self.max_iterations} iterations",
        )


def observation(result: ToolResult) -> str:
    """What the model is told of a tool result: the (possibly truncated) value, or the error."""
    info = result.info
    if not info.success:
        return f"Error ({info.error_code}): {info.error}"
    value = info.result
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _remember_failure(failures: dict[str, ToolResult], result: ToolResult) -> None:
    """Keys a failed result by the texts a model could echo: its observation and its error."""
    for text in (observation(result), result.error or ""):
        if text.strip():
            failures[text.strip()] = result


def _conclude(
    engine: ReasoningEngine, answer: str, sources: list[UUID], failures: dict[str, ToolResult]
) -> None:
    echoed = failures.get(answer.strip())
    if echoed is not None:
        call = echoed.call_step.tool_call
        tool = call.tool_name if call is not None else "tool"
        raise ChainAbort(
            echoed.error_code or ErrorCode.TOOL_ERROR,
            f"the model's final answer was only the error of its failed {tool} call: "
            f"{echoed.error}",
        )
    engine.add_synthesis(answer, sources)


def _coerce(
    action_input: dict[str, Any] | str | None, engine: ReasoningEngine, tool: str
) -> dict[str, Any] | str:
    """A bare text input goes to a tool's only required string argument; otherwise it is
    passed on as raw JSON for the executor to judge."""
    if isinstance(action_input, dict):
        return action_input
    text = action_input or ""
    for definition in engine.available_tools():
        if definition.name != tool:
            continue
        required = definition.parameters.get("required", [])
        properties = definition.parameters.get("properties", {})
        if len(required) == 1 and properties.get(required[0], {}).get("type") == "string":
            return {required[0]: text}
    return text


def _json(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
