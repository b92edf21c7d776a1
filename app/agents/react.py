"""The autonomous ReAct agent: the model decides every step until it gives a final answer."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self
from uuid import UUID

from app.agents.base import AgentParts, CoTAgent, ToolCallingMode
from app.agents.engine import LLMCallResult, ModelToolCall, ReasoningEngine
from app.agents.history import as_text_history
from app.agents.images import IMAGE_FOLLOWS, IMAGE_NOT_SHOWN, image_parts
from app.agents.models import AgentTask
from app.agents.on_limit import FinalCallReserve, limit_message
from app.agents.output import InvalidResponseFormat, OutputCheck, OutputFormat
from app.agents.parser import parse_react
from app.agents.prompts import FORMAT_REMINDER, NATIVE_SYSTEM_PROMPT, text_system_prompt
from app.agents.spec import AgentSpec, OnLimit
from app.chain import ErrorCode
from app.chain.errors import ChainAbort
from app.chain.models import StopReason
from app.chain.observations import observation_text
from app.llm import LLMGateway
from app.tools.executor import ToolExecutor
from app.tools.results import ToolInvocation, ToolResult

_TEXT_STOP = ["\nObservation:"]


@dataclass(slots=True)
class _Run:
    """One run's conversation and what its answer rests on."""

    engine: ReasoningEngine
    messages: list[dict[str, Any]]
    text_format: bool
    output: OutputFormat | None
    # The `response_format` sent with each call, when the provider enforces the schema.
    response_format: dict[str, Any] | None
    reserve: FinalCallReserve | None
    retries_left: int
    sources: list[UUID] = field(default_factory=list)
    failures: dict[str, ToolResult] = field(default_factory=dict)
    invalid_answers: int = 0


class ReActAgent(CoTAgent):
    """Thought → action → observation, repeated. Uses the model's native tool calling when
    LiteLLM says every deployment of the model supports it (`mode="auto"`), the text ReAct
    format otherwise. Tool failures go back to the model as observations; the final answer
    becomes a synthesis step citing the tool results and the answering LLM call.

    A final answer that is nothing but the error of one of the run's failed tool calls (a
    model echoing its observation) fails the chain with that call's error code: a failed tool
    result is never the answer of a completed task. Only a verbatim echo is caught; an answer
    that explains a failure in its own words is the model's to give.

    With a `response_format` (a JSON Schema) the answer must be JSON matching it: the
    provider is asked to enforce it where LiteLLM says every deployment can (native tool
    calling and an object schema), the system prompt states it otherwise. An answer that does
    not match goes back to the model with what is wrong, at most `output_retries` times
    (each a call of the loop); then the task fails `invalid_output`. With `on_limit="answer"`,
    a limit ends the run with one last tool-less call instead of a failure (`app.agents.
    on_limit`)."""

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
        instructions: str | None = None,
        response_format: dict[str, Any] | None = None,
        on_limit: OnLimit = "fail",
        output_retries: int = 2,
    ) -> None:
        super().__init__(executor, default_model=default_model, max_output_tokens=max_output_tokens)
        self.gateway = gateway
        self.max_iterations = max_iterations
        self.temperature = temperature
        self.mode = mode
        self.instructions = instructions
        self.response_format = response_format
        self.on_limit = on_limit
        self.output_retries = output_retries

    @classmethod
    def from_spec(cls, spec: AgentSpec, parts: AgentParts) -> Self:
        return cls(
            parts.executor,
            parts.gateway,
            default_model=spec.model or parts.default_model,
            max_iterations=spec.max_iterations or parts.max_iterations,
            max_output_tokens=spec.max_output_tokens or parts.max_output_tokens,
            temperature=spec.temperature,
            mode=parts.mode,
            instructions=spec.instructions,
            response_format=spec.response_format,
            on_limit=spec.on_limit,
            output_retries=parts.output_retries,
        )

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
        output = self._output_format()
        response_format = None
        if output is not None and self.gateway.supports_response_schema(engine.default_model):
            response_format = output.native_request
        system = self.instructions or NATIVE_SYSTEM_PROMPT
        if output is not None and response_format is None:
            system = f"{system}\n\n{output.instructions(text_format=False)}"
        messages = [{"role": "system", "content": system}, *task.history, *task.conversation()]
        run = self._run_state(engine, messages, output, response_format, text_format=False)
        sees_images = self.gateway.supports_vision(engine.default_model)
        for _ in range(self.max_iterations):
            if await self._final_call_due(run, tools):
                return
            reply = await self._call_llm(
                engine, messages, tools=tools, response_format=response_format
            )
            calls = reply.tool_calls
            if not calls:
                content = reply.content or ""
                if await self._answer(run, reply, content, content):
                    return
                continue
            if reply.content:
                engine.add_thinking(reply.content, parent_step_id=reply.step_id)
            results = await engine.call_tools(
                [ToolInvocation(call.name, call.arguments) for call in calls],
                parent_step_id=reply.step_id,
            )
            messages.extend(tool_turn(reply.content, calls, results, sees_images=sees_images))
            for result in results:
                _remember(run, result)
        await self._out_of_iterations(run)

    async def _reason_text(self, task: AgentTask, engine: ReasoningEngine) -> None:
        tools = engine.available_tools()
        output = self._output_format()
        system = text_system_prompt(tools)
        if self.instructions:
            system = f"{self.instructions}\n\n{system}"
        if output is not None:
            # A provider-enforced schema would forbid the Thought/Action format itself.
            system = f"{system}\n\n{output.instructions(text_format=True)}"
        messages = [
            {"role": "system", "content": system},
            *as_text_history(task.history),
            *task.conversation(),
        ]
        run = self._run_state(engine, messages, output, None, text_format=True)
        sees_images = self.gateway.supports_vision(engine.default_model)
        for _ in range(self.max_iterations):
            if await self._final_call_due(run, None):
                return
            reply = await self._call_llm(engine, messages, stop=_TEXT_STOP)
            content = reply.content or ""
            step = parse_react(content)
            if step.thought:
                engine.add_thinking(step.thought, parent_step_id=reply.step_id)
            if step.final_answer is not None:
                if await self._answer(run, reply, step.final_answer, content):
                    return
                continue
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
            _remember(run, result)
            said = f"Observation: {observation(result, sees_images=sees_images)}"
            images = image_parts(step.action, result) if sees_images else []
            messages.append(
                {"role": "user", "content": [{"type": "text", "text": said}, *images]}
                if images
                else {"role": "user", "content": said}
            )
        await self._out_of_iterations(run)

    def _output_format(self) -> OutputFormat | None:
        if self.response_format is None:
            return None
        try:
            return OutputFormat(self.response_format)
        except InvalidResponseFormat as exc:
            raise _unusable(exc) from exc

    def _run_state(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        output: OutputFormat | None,
        response_format: dict[str, Any] | None,
        *,
        text_format: bool,
    ) -> _Run:
        reserve = None
        if self.on_limit == "answer":
            reserve = FinalCallReserve(
                engine, self.max_output_tokens, response_format, text_format=text_format
            )
        return _Run(
            engine,
            messages,
            text_format,
            output,
            response_format,
            reserve,
            retries_left=self.output_retries,
        )

    async def _answer(self, run: _Run, reply: LLMCallResult, answer: str, content: str) -> bool:
        """Concludes with `answer` when it is acceptable (True). One that misses the
        `response_format` goes back to the model with what is wrong (False), recorded as a
        `thinking` step under the reply: the judgement is the agent's own reasoning about the
        answer, no tool ran and nothing was spent, and it must not be a `synthesis`, which
        would read as the answer. Out of retries, the task fails `invalid_output`."""
        engine = run.engine
        check = await _check(run, answer)
        if check.valid:
            _conclude(run, answer, reply, output=check.value)
            return True
        run.invalid_answers += 1
        errors = "; ".join(check.errors)
        if run.retries_left <= 0:
            raise ChainAbort(
                ErrorCode.INVALID_OUTPUT,
                f"the answer did not match the agent's response_format after "
                f"{run.invalid_answers} attempt(s): {errors}",
                details={"attempts": run.invalid_answers, "errors": list(check.errors)},
            )
        run.retries_left -= 1
        engine.add_thinking(
            f"The answer does not match the response format, so the model is asked again "
            f"({run.retries_left} more time(s) at most): {errors}",
            parent_step_id=reply.step_id,
        )
        assert run.output is not None
        run.messages.append({"role": "assistant", "content": content})
        feedback = run.output.feedback(check.errors, text_format=run.text_format)
        run.messages.append({"role": "user", "content": feedback})
        return False

    async def _final_call_due(self, run: _Run, tools: list[str] | None) -> bool:
        """Makes the final call now (True) when the next ordinary call would leave too
        little of the budget for it."""
        if run.reserve is None:
            return False
        reason = await run.reserve.stop_before(run.messages, tools)
        if reason is None:
            return False
        await self._final_call(run, reason)
        return True

    async def _out_of_iterations(self, run: _Run) -> None:
        if self.on_limit != "answer":
            raise ChainAbort(
                ErrorCode.MAX_ITERATIONS,
                f"no final answer after {self.max_iterations} iterations",
            )
        await self._final_call(run, "max_iterations")

    async def _final_call(self, run: _Run, reason: StopReason) -> None:
        """The last, tool-less call: the model is told why, answers from what the run has,
        and the run ends `incomplete` with `reason`. Its answer gets no second try: one that
        misses the `response_format` stays the task's result, without an `output`."""
        engine = run.engine
        value = self.max_iterations if reason == "max_iterations" else None
        messages = [*run.messages, limit_message(reason, value, text_format=run.text_format)]
        max_tokens = None if run.reserve is None else await run.reserve.final_max_tokens(messages)
        reply = await self._call_llm(
            engine,
            messages,
            max_tokens=max_tokens,
            stop=_TEXT_STOP if run.text_format else None,
            response_format=run.response_format,
        )
        content = reply.content or ""
        answer = content.strip()
        if run.text_format:
            step = parse_react(content)
            if step.thought:
                engine.add_thinking(step.thought, parent_step_id=reply.step_id)
            if step.final_answer is not None:
                answer = step.final_answer
        check = await _check(run, answer)
        if not check.valid:
            engine.add_thinking(
                "The final answer does not match the response format; it stays the result, "
                f"without an output: {'; '.join(check.errors)}",
                parent_step_id=reply.step_id,
            )
        _conclude(run, answer, reply, output=check.value, stop_reason=reason)

    async def _call_llm(
        self,
        engine: ReasoningEngine,
        messages: list[dict[str, Any]],
        *,
        tools: list[str] | None = None,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> LLMCallResult:
        reply = await engine.call_llm(
            messages=messages,
            tools=tools,
            temperature=self.temperature,
            max_tokens=max_tokens,
            stop=stop,
            response_format=response_format,
        )
        if not reply.success:
            info = reply.result.info
            raise ChainAbort(
                ErrorCode.LLM_ERROR,
                f"the model call failed after {info.attempts} attempt(s): "
                f"{info.error_code}: {info.error}",
            )
        return reply


async def _check(run: _Run, answer: str) -> OutputCheck:
    """Off the event loop, in one of the tenant's worker threads: the schema's patterns may
    take up to their budget to match."""
    if run.output is None:
        return OutputCheck()
    try:
        return await run.engine.in_thread(run.output.check, answer)
    except InvalidResponseFormat as exc:
        raise _unusable(exc) from exc


def _unusable(exc: InvalidResponseFormat) -> ChainAbort:
    return ChainAbort(
        ErrorCode.INVALID_OUTPUT, f"the agent's response_format is not a usable JSON Schema: {exc}"
    )


def _remember(run: _Run, result: ToolResult) -> None:
    if result.success:
        run.sources.append(result.result_step.id)
    else:
        _remember_failure(run.failures, result)


def observation(result: ToolResult, *, sees_images: bool = False) -> str:
    """What the model is told of a tool result: the (possibly truncated) value, or the error;
    of the images it handed on, that they follow, or that this model cannot see them."""
    info = result.info
    # One text for every teller: a resumed run or a replay sends the requests the first run
    # did, and a reader's view recognises the result in the prompts that repeat it.
    text = observation_text(
        {
            "success": info.success,
            "result": info.result,
            "error_code": info.error_code,
            "error": info.error,
        }
    )
    if not info.success:
        return text
    if result.images:
        text = f"{text}\n{IMAGE_FOLLOWS if sees_images else IMAGE_NOT_SHOWN}"
    return text


def tool_turn(
    content: str | None,
    calls: Sequence[ModelToolCall],
    results: Sequence[ToolResult],
    *,
    sees_images: bool = False,
) -> list[dict[str, Any]]:
    """The messages a turn of native tool calls adds: the model's reply with its calls, then
    each call's result; a tool message holds text only, so the images the tools handed on (to
    a model that sees them) follow in one user message."""
    turn: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _json(call.arguments)},
                }
                for call in calls
            ],
        }
    ]
    images: list[dict[str, Any]] = []
    for call, result in zip(calls, results, strict=True):
        turn.append(
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": observation(result, sees_images=sees_images),
            }
        )
        if sees_images:
            images.extend(image_parts(call.name, result))
    if images:
        turn.append({"role": "user", "content": images})
    return turn


def _remember_failure(failures: dict[str, ToolResult], result: ToolResult) -> None:
    """Keys a failed result by the texts a model could echo: its observation and its error."""
    for text in (observation(result), result.error or ""):
        if text.strip():
            failures[text.strip()] = result


def _conclude(
    run: _Run,
    answer: str,
    reply: LLMCallResult,
    *,
    output: Any = None,
    stop_reason: StopReason | None = None,
) -> None:
    echoed = run.failures.get(answer.strip())
    if echoed is not None:
        call = echoed.call_step.tool_call
        tool = call.tool_name if call is not None else "tool"
        raise ChainAbort(
            echoed.error_code or ErrorCode.TOOL_ERROR,
            f"the model's final answer was only the error of its failed {tool} call: "
            f"{echoed.error}",
        )
    run.engine.add_synthesis(
        answer, [*run.sources, reply.step_id], output=output, stop_reason=stop_reason
    )


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
    return arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
