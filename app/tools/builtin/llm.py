"""The LLM as a tool: every model call goes through the executor like any other tool call."""

import asyncio
import json
from typing import Any

from app.chain import ErrorCode, FailedAttempt, ToolResultInfo, ToolType, format_usd
from app.llm import LLMCallError, LLMDelta, LLMErrorKind, LLMGateway, LLMRequest, LLMResponse
from app.tools.base import BaseTool
from app.tools.errors import ErrorClass, FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    CallEstimate,
    ModelAccess,
    OutputDelta,
    RetryPolicy,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
)
from app.tools.registry import ToolRegistry

LLM_TOOL_NAME = "llm"

_ERROR_CLASSES = {
    LLMErrorKind.TIMEOUT: ErrorClass.TIMEOUT,
    LLMErrorKind.RATE_LIMIT: ErrorClass.RATE_LIMIT,
    LLMErrorKind.TRANSIENT: ErrorClass.TRANSIENT,
}

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "description": "A model name of the model list."},
        "prompt": {"type": "string", "description": "A single user message."},
        "system": {"type": "string", "description": "A system message put before `prompt`."},
        "messages": {
            "type": "array",
            "minItems": 1,
            "description": "Chat messages in OpenAI format (instead of `prompt`).",
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {"role": {"enum": ["system", "user", "assistant", "tool"]}},
            },
        },
        "tools": {
            "type": "array",
            "uniqueItems": True,
            "items": {"type": "string"},
            "description": "Names of registered tools the model may call.",
        },
        "tool_choice": {"anyOf": [{"enum": ["auto", "none", "required"]}, {"type": "object"}]},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "max_tokens": {"type": "integer", "minimum": 1},
        "stop": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "response_format": {
            "type": "object",
            "description": "A JSON Schema the provider holds the answer to, in OpenAI's form; "
            "only for models whose deployments all support it.",
            "required": ["type", "json_schema"],
            "properties": {
                "type": {"const": "json_schema"},
                "json_schema": {
                    "type": "object",
                    "required": ["name", "schema"],
                    "properties": {
                        "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                        "schema": {"type": "object"},
                        "strict": {"type": "boolean"},
                    },
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
        "purpose": {
            "enum": ["compaction"],
            "description": "Why the agent makes the call, when it is not a step of its "
            "reasoning (`compaction`: summarising the oldest part of the conversation).",
        },
    },
    "additionalProperties": False,
}


class LLMTool(BaseTool):
    """Calls a model through the gateway. Streams when the call's context has `on_delta`,
    handing it each piece of the reply as it arrives (only then is a streaming request made).

    Its value is `{"content", "tool_calls": [{"id", "name", "arguments"}], "finish_reason"}`,
    with `"reasoning"` too when the provider returned reasoning apart from the answer;
    tool-call arguments are parsed JSON objects, or the raw text when the model wrote invalid
    JSON (the executor then refuses the call with a clear message).
    """

    def __init__(
        self,
        gateway: LLMGateway,
        registry: ToolRegistry,
        *,
        timeout_s: float = 180.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._gateway = gateway
        self._registry = registry
        self._definition = ToolDefinition(
            name=LLM_TOOL_NAME,
            type=ToolType.LLM,
            description="Asks a large language model; fallbacks across deployments included.",
            parameters=_PARAMETERS,
            returns_description="the model's text and tool calls",
            timeout_s=timeout_s,
            retry=retry or RetryPolicy(),
            idempotent=True,
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        request = self.request(arguments, context.models, context.tools)
        try:
            if context.on_delta is None:
                response = await self._gateway.complete(request)
            else:
                response = await self._stream(request, context)
        except LLMCallError as exc:
            raise ToolError(
                exc.message,
                error_class=_ERROR_CLASSES.get(exc.kind, ErrorClass.PERMANENT),
                status_code=exc.status_code,
                retry_after_s=exc.retry_after_s,
                failed_attempts=[*exc.failed_attempts, *self._withheld(request, context.models)],
            ) from exc
        value: dict[str, Any] = {
            "content": response.content,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": _parsed(call.arguments)}
                for call in response.tool_calls
            ],
            "finish_reason": response.finish_reason,
        }
        if response.reasoning is not None:
            value["reasoning"] = response.reasoning
        return ToolOutput(
            value=value,
            model=response.model,
            provider=response.provider,
            deployment=response.deployment,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cost_usd=response.cost_usd,
            unpriced=response.unpriced,
            failed_attempts=response.failed_attempts,
        )

    def _withheld(self, request: LLMRequest, models: ModelAccess | None) -> list[FailedAttempt]:
        """The fallbacks the model list has for a failed call that its policy kept it from
        trying, so the chain says why they were not."""
        if models is None:
            return []
        return [
            FailedAttempt(
                attempt=1,
                error_class=ErrorCode.MODEL_NOT_APPROVED,
                model=name,
                message=f"fallback {name!r} not tried: not approved for this tenant",
            )
            for name in self._gateway.fallbacks(request.model)
            if not models.approves(name)
        ]

    async def estimate(
        self, arguments: dict[str, Any], context: ToolCallContext, *, added_input_tokens: int = 0
    ) -> CallEstimate:
        """`added_input_tokens`: prompt tokens beyond the arguments' messages (a reply still to
        come), for an estimate made ahead of the call."""
        estimate = await self._gateway.estimate(
            self.request(arguments, context.models, context.tools),
            added_input_tokens=added_input_tokens,
            tenant_id=context.tenant_id,
        )
        return CallEstimate(estimate.input_tokens, estimate.max_output_tokens, estimate.cost_usd)

    def summarize(self, result: ToolResultInfo) -> str:
        if not result.success:
            return f"LLM call failed: {result.error_code}"
        cost = "unpriced" if result.cost_usd is None else f"${format_usd(result.cost_usd)}"
        return (
            f"{result.model} ({result.deployment}): {result.input_tokens} in / "
            f"{result.output_tokens} out tokens, {cost}"
        )

    def input_window(
        self, arguments: dict[str, Any], models: ModelAccess | None = None
    ) -> int | None:
        """The most prompt tokens the call may send (every model that may answer it fits)."""
        model = self.model(arguments)
        if not self._gateway.has_model(model):
            return None
        fallbacks = self._gateway.fallbacks(model)
        if models is not None:
            fallbacks = [name for name in fallbacks if models.approves(name)]
        return self._gateway.input_window(model, fallbacks)

    def model(self, arguments: dict[str, Any]) -> str:
        """The model a call asks for."""
        model: str = arguments.get("model") or self._gateway.default_model
        return model

    def request(
        self,
        arguments: dict[str, Any],
        models: ModelAccess | None = None,
        tools: ToolRegistry | None = None,
    ) -> LLMRequest:
        """The gateway request for schema-valid arguments; refuses what the schema cannot.
        With `models`, only approved fallbacks are kept and the output is capped."""
        model = self.model(arguments)
        problems: list[FieldError] = []
        if not self._gateway.has_model(model):
            known = ", ".join(self._gateway.model_names())
            problems.append(FieldError("model", f"unknown model {model!r} (configured: {known})"))
        if "messages" in arguments:
            messages = list(arguments["messages"])
            if "system" in arguments:
                messages.insert(0, {"role": "system", "content": arguments["system"]})
        elif "prompt" in arguments:
            messages = [{"role": "user", "content": arguments["prompt"]}]
            if "system" in arguments:
                messages.insert(0, {"role": "system", "content": arguments["system"]})
        else:
            messages = []
            problems.append(FieldError("prompt", "either `prompt` or `messages` is required"))
        registry = tools or self._registry
        offered = []
        for name in arguments.get("tools", []):
            if name == LLM_TOOL_NAME or name not in registry:
                problems.append(FieldError("tools", f"{name!r} is not a tool the model can call"))
            else:
                offered.append(registry.definition(name).to_openai_tool())
        if problems:
            raise InvalidToolArguments(LLM_TOOL_NAME, problems)
        max_tokens: int | None = arguments.get("max_tokens")
        fallbacks: list[str] | None = None
        if models is not None:
            fallbacks = [name for name in self._gateway.fallbacks(model) if models.approves(name)]
            # Whichever model answers, its cap holds.
            caps = [c for name in [model, *fallbacks] if (c := models.output_cap(name))]
            if caps:
                max_tokens = min(max_tokens or self._gateway.default_max_tokens, *caps)
        return LLMRequest(
            model=model,
            messages=messages,
            tools=offered or None,
            tool_choice=arguments.get("tool_choice"),
            temperature=arguments.get("temperature"),
            max_tokens=max_tokens,
            stop=arguments.get("stop"),
            response_format=arguments.get("response_format"),
            fallbacks=fallbacks,
        )

    async def _stream(self, request: LLMRequest, context: ToolCallContext) -> LLMResponse:
        deliver = context.on_delta
        assert deliver is not None
        # Inside the executor the call's context names its `tool_call` step as the parent.
        step_id = context.parent_step_id
        assert step_id is not None
        correlation_id, attempt = context.correlation_id, context.attempt
        level = self._definition.visibility.default_level
        async for event in self._gateway.stream(request):
            if isinstance(event, LLMDelta):
                deliver(
                    OutputDelta(step_id, correlation_id, attempt, event.kind, event.text, level)
                )
                # A reply that arrives faster than it is parsed never suspends the stream:
                # let whoever sends the deltas on (and stores the steps they follow) keep up.
                await asyncio.sleep(0)
            else:
                return event
        raise ToolError(
            "the model's stream ended without a response", error_class=ErrorClass.TRANSIENT
        )


def _parsed(arguments: str) -> dict[str, Any] | str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments
