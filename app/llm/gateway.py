"""The LLM gateway: one LiteLLM Router over the model list, with fallbacks, usage and cost."""

import inspect
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.bulkheads import TenantThreads
from app.chain import FailedAttempt, quantize_usd
from app.llm.config import DEMO_MODEL, DEMO_PROVIDER, ModelList
from app.llm.demo import register_demo_provider
from app.llm.errors import LLMCallError, LLMErrorKind, ModelConfigError, UnknownModelError
from app.llm.litellm_env import Router, Usage, litellm, use_openai_sdk
from app.llm.pricing import Deployment, resolve_deployment
from app.llm.router import TrackingRouter, classify, tracking_attempts
from app.llm.tokens import PromptTokens
from app.llm.types import LLMDelta, LLMRequest, LLMResponse, LLMToolCall

logger = logging.getLogger(__name__)

_ROUTER_PARAMETERS = frozenset(inspect.signature(Router.__init__).parameters) - {
    "self",
    "model_list",
}


@dataclass(frozen=True, slots=True)
class LLMEstimate:
    """Pre-call estimate: prompt tokens counted, the output cap as output, the dearest
    deployment that may answer (fallbacks included). Cost is None if any is unpriced."""

    input_tokens: int
    max_output_tokens: int
    cost_usd: Decimal | None


class LLMGateway:
    """Calls models by model-list name. Built once at start-up; safe to share across tasks."""

    def __init__(
        self,
        model_list: ModelList,
        *,
        default_model: str = DEMO_MODEL,
        request_timeout_s: float = 60.0,
        default_max_tokens: int = 4096,
        openai_sdk: bool = False,
        threads: TenantThreads | None = None,
    ) -> None:
        """`threads`: the worker threads a tenant's large prompts are counted in, shared with
        the process's other per-tenant CPU work."""
        names = model_list.model_names()
        if default_model not in names:
            raise ModelConfigError(
                f"default model {default_model!r} is not in the model list ({', '.join(names)})"
            )
        self.default_model = default_model
        self.default_max_tokens = default_max_tokens
        use_openai_sdk(openai_sdk)
        self._fallbacks = model_list.fallbacks()
        self._prompt_tokens = PromptTokens()
        self._threads = threads or TenantThreads()
        if any(d.litellm_model.startswith(f"{DEMO_PROVIDER}/") for d in model_list.model_list):
            register_demo_provider()

        per_group: Counter[str] = Counter()
        entries: list[dict[str, Any]] = []
        for config in model_list.model_list:
            per_group[config.model_name] += 1
            deployment_id = str(
                config.model_info.get("id") or f"{config.model_name}#{per_group[config.model_name]}"
            )
            entry = config.model_dump()
            entry["model_info"] = {**config.model_info, "id": deployment_id}
            entries.append(entry)
        ids = [e["model_info"]["id"] for e in entries]
        if len(set(ids)) != len(ids):
            raise ModelConfigError(f"deployment ids must be unique: {ids}")

        self._router = TrackingRouter(
            model_list=entries, **_router_kwargs(model_list.router_settings, request_timeout_s)
        )
        # Resolved after the Router registered the model list's prices under deployment ids.
        self._deployments = {
            deployment_id: resolve_deployment(config, deployment_id)
            for deployment_id, config in zip(ids, model_list.model_list, strict=True)
        }
        self._groups: dict[str, list[Deployment]] = {name: [] for name in names}
        for deployment in self._deployments.values():
            self._groups[deployment.model_name].append(deployment)

    def model_names(self) -> list[str]:
        return list(self._groups)

    def has_model(self, model: str) -> bool:
        return model in self._groups

    def deployments(self, model: str) -> list[Deployment]:
        try:
            return self._groups[model]
        except KeyError:
            raise UnknownModelError(model, self.model_names()) from None

    def fallbacks(self, model: str) -> list[str]:
        return self._fallbacks.get(model, [])

    def input_window(self, model: str, fallbacks: list[str] | None = None) -> int | None:
        """The most prompt tokens a call to `model` may send: the smallest window of every
        deployment that may answer it (its fallbacks' too). None when one is not known."""
        names = [model, *(self.fallbacks(model) if fallbacks is None else fallbacks)]
        windows = [d.max_input_tokens for name in names for d in self.deployments(name)]
        if not windows or any(window is None for window in windows):
            return None
        return min(window for window in windows if window is not None)

    def supports_native_tools(self, model: str) -> bool:
        """True when every deployment of the model can take OpenAI-style tools."""
        return all(d.supports_tools for d in self.deployments(model))

    def supports_vision(self, model: str) -> bool:
        """True when every deployment that may answer the model (its fallbacks' too) takes
        images in messages: an image sent to one that does not would fail the call."""
        names = [model, *self.fallbacks(model)]
        return all(d.supports_vision for name in names for d in self.deployments(name))

    def supports_response_schema(self, model: str) -> bool:
        """True when LiteLLM says every deployment that may answer the model (its fallbacks'
        too) takes a JSON Schema `response_format`."""
        names = [model, *self.fallbacks(model)]
        return all(_supports_response_schema(d) for name in names for d in self.deployments(name))

    async def warm_up(self) -> None:
        """Runs one call on the in-process demo model, so LiteLLM's lazily loaded code and
        tokenizer are ready before the first task (that first call costs up to a second)."""
        # With a tool, so the code LiteLLM loads for tool calls is loaded too.
        tool = {
            "type": "function",
            "function": {
                "name": "noop",
                "description": "Does nothing.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        await self.complete(
            LLMRequest(
                model=DEMO_MODEL, messages=[{"role": "user", "content": "Say ok."}], tools=[tool]
            )
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs = self._call_kwargs(request)
        with tracking_attempts() as attempts:
            try:
                response = await self._router.acompletion(**kwargs)
            except Exception as exc:
                raise _call_error(exc, attempts) from exc
        message = response.choices[0].message
        tool_calls = [
            LLMToolCall(
                id=call.id or f"call_{index}",
                name=call.function.name or "",
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or [])
        ]
        return self._response(
            request,
            response,
            content=message.content,
            reasoning=getattr(message, "reasoning_content", None) or None,
            tool_calls=tool_calls,
            finish_reason=response.choices[0].finish_reason,
            usage=getattr(response, "usage", None),
            attempts=attempts,
            streamed=False,
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMDelta | LLMResponse]:
        """Yields text deltas as they arrive, then the complete `LLMResponse`. Reasoning a
        provider streams apart from the answer (LiteLLM's `reasoning_content`) comes as
        `reasoning` deltas, and in the response's `reasoning`."""
        kwargs = self._call_kwargs(request)
        kwargs.update(stream=True, stream_options={"include_usage": True})
        with tracking_attempts() as attempts:
            try:
                stream = await self._router.acompletion(**kwargs)
            except Exception as exc:
                raise _call_error(exc, attempts) from exc
        parts: list[str] = []
        thoughts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        usage: Any = None
        try:
            async for chunk in stream:
                usage = getattr(chunk, "usage", None) or usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                finish_reason = choice.finish_reason or finish_reason
                delta = choice.delta
                reasoning = getattr(delta, "reasoning_content", None)
                if reasoning:
                    thoughts.append(reasoning)
                    yield LLMDelta(reasoning, "reasoning")
                if delta.content:
                    parts.append(delta.content)
                    yield LLMDelta(delta.content)
                for call in delta.tool_calls or []:
                    slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    if call.function is not None:
                        slot["name"] += call.function.name or ""
                        slot["arguments"] += call.function.arguments or ""
        except Exception as exc:
            raise _call_error(exc, attempts) from exc
        yield self._response(
            request,
            stream,
            content="".join(parts) or None,
            reasoning="".join(thoughts) or None,
            tool_calls=[
                LLMToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
                for i, c in sorted(calls.items())
            ],
            finish_reason=finish_reason,
            usage=usage,
            attempts=attempts,
            streamed=True,
        )

    async def estimate(
        self, request: LLMRequest, *, added_input_tokens: int = 0, tenant_id: str | None = None
    ) -> LLMEstimate:
        """`added_input_tokens`: what the prompt will hold beyond `request.messages` when the
        call is made (a reply still to come), counted as input. `tenant_id`: whose worker
        threads count a large prompt."""
        fallbacks = (
            self.fallbacks(request.model) if request.fallbacks is None else request.fallbacks
        )
        candidates = [
            deployment
            for name in [request.model, *fallbacks]
            for deployment in self.deployments(name)
        ]
        messages = request.messages
        if request.response_format is not None:
            # Providers put the schema into the prompt, and bill it as input.
            schema = json.dumps(request.response_format, ensure_ascii=False)
            messages = [*messages, {"role": "system", "content": schema}]
        input_tokens = added_input_tokens + await self._prompt_tokens.count_off_loop(
            candidates[0].litellm_model,
            messages,
            request.tools,
            threads=self._threads,
            tenant_id=tenant_id,
        )
        max_output = request.max_tokens or self.default_max_tokens
        costs = [d.cost_of_tokens(input_tokens, max_output) for d in candidates]
        priced = [c for c in costs if c is not None]
        return LLMEstimate(
            input_tokens=input_tokens,
            max_output_tokens=max_output,
            cost_usd=max(priced) if len(priced) == len(costs) else None,
        )

    def _call_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        self.deployments(request.model)  # unknown model: fail before the router does
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages}
        optional = {
            "tools": request.tools or None,
            "tool_choice": request.tool_choice if request.tools else None,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stop": request.stop or None,
            "response_format": request.response_format,
        }
        kwargs.update({key: value for key, value in optional.items() if value is not None})
        if request.fallbacks is not None:
            kwargs["fallbacks"] = [{request.model: request.fallbacks}] if request.fallbacks else []
        return kwargs

    def _response(
        self,
        request: LLMRequest,
        response: Any,
        *,
        content: str | None,
        tool_calls: list[LLMToolCall],
        finish_reason: str | None,
        usage: Any,
        attempts: list[FailedAttempt],
        streamed: bool,
        reasoning: str | None = None,
    ) -> LLMResponse:
        hidden = getattr(response, "_hidden_params", None) or {}
        deployment = self._deployments.get(str(hidden.get("model_id")))
        if deployment is None:  # the router always stamps it; never guess a price
            raise LLMCallError(
                f"LiteLLM did not say which deployment of {request.model!r} answered",
                kind=LLMErrorKind.UNKNOWN,
            )
        # A stream's hidden cost is computed before its usage arrives (LiteLLM reports 0.0).
        litellm_cost = None if streamed else hidden.get("response_cost")
        if usage is None or not getattr(usage, "prompt_tokens", None):
            usage = _counted_usage(deployment, request, content, tool_calls)
            litellm_cost = None  # priced on usage the provider did not report
        if not deployment.priced:
            cost = None
        elif isinstance(litellm_cost, int | float):
            # LiteLLM already priced this response with the deployment's registered prices.
            cost = quantize_usd(litellm_cost)
        else:
            cost = deployment.cost(usage)
        return LLMResponse(
            content=content,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            model=deployment.model_name,
            deployment=deployment.id,
            provider=deployment.provider,
            input_tokens=int(usage.prompt_tokens or 0),
            output_tokens=int(usage.completion_tokens or 0),
            cost_usd=cost,
            unpriced=cost is None,
            failed_attempts=list(attempts),
            reasoning=reasoning,
        )


def _router_kwargs(settings: dict[str, Any], request_timeout_s: float) -> dict[str, Any]:
    # We own retries (the executor's policy); the router still falls back across models.
    kwargs: dict[str, Any] = {"num_retries": 0, "timeout": request_timeout_s}
    for key, value in settings.items():
        if key in _ROUTER_PARAMETERS:
            kwargs[key] = value
        else:
            logger.warning("router_settings.%s is not a LiteLLM Router setting; ignored", key)
    return kwargs


def _call_error(exc: Exception, attempts: list[FailedAttempt]) -> LLMCallError:
    """The error of a call whose every deployment failed. LiteLLM re-raises the first
    deployment's error; the call is worth retrying if any deployment's failure was."""
    error = classify(exc)
    kind = error.kind
    if not kind.retryable:
        retryable = [a for a in attempts if LLMErrorKind(a.error_class).retryable]
        kind = LLMErrorKind(retryable[-1].error_class) if retryable else kind
    return LLMCallError(
        error.message,
        kind=kind,
        status_code=error.status_code,
        retry_after_s=error.retry_after_s,
        failed_attempts=list(attempts),
    )


def _supports_response_schema(deployment: Deployment) -> bool:
    try:
        return bool(
            litellm.supports_response_schema(
                model=deployment.litellm_model, custom_llm_provider=deployment.provider
            )
        )
    except Exception:  # a model LiteLLM does not know: no
        return False


def _counted_usage(
    deployment: Deployment,
    request: LLMRequest,
    content: str | None,
    tool_calls: list[LLMToolCall],
) -> Any:
    """Usage by LiteLLM's tokenizer, for providers that report none (some streams)."""
    prompt = litellm.token_counter(
        model=deployment.litellm_model, messages=request.messages, tools=request.tools
    )
    text = (content or "") + "".join(call.name + call.arguments for call in tool_calls)
    completion = litellm.token_counter(model=deployment.litellm_model, text=text) if text else 0
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
