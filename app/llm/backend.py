"""The gateway's LiteLLM side: one Router over the model list, each deployment resolved
(provider, prices, capabilities), calls with usage and cost, the direct HTTP path beside the
Router for the deployments it would only relay. Importing it imports LiteLLM
(seconds of CPU): `LLMGateway` loads it in the background or on first use."""

import asyncio
import inspect
import logging
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from app.bulkheads import TenantThreads
from app.chain import FailedAttempt, quantize_usd
from app.llm import counting
from app.llm.config import DEMO_MODEL, DEMO_PROVIDER, ModelList
from app.llm.demo import register_demo_provider
from app.llm.direct import Answer, DirectCalls, Endpoint, direct_endpoints
from app.llm.errors import LLMCallError, LLMErrorKind, after_every_attempt
from app.llm.groups import DeploymentGroups
from app.llm.litellm_env import (
    MAX_CONNECTIONS,
    LlmProviders,
    ProviderConfigManager,
    Router,
    Usage,
    litellm,
    map_finish_reason,
    use_openai_sdk,
)
from app.llm.pricing import Deployment, resolve_deployment
from app.llm.router import TrackingRouter, classify, tracking_attempts
from app.llm.tokens import PromptTokens
from app.llm.types import (
    LLMDelta,
    LLMRequest,
    LLMResponse,
    LLMToolCall,
    StreamedReply,
)

logger = logging.getLogger(__name__)

_ROUTER_PARAMETERS = frozenset(inspect.signature(Router.__init__).parameters) - {
    "self",
    "model_list",
}


class LiteLLMBackend(DeploymentGroups):
    """Calls the model list's deployments through LiteLLM, or over HTTP directly for those it
    would only relay (`app.llm.direct`, unless `direct` is off or `openai_sdk` on); built by
    `LLMGateway` from the Router entries it checked (`entries`, with their deployment `ids`)."""

    def __init__(
        self,
        model_list: ModelList,
        entries: list[dict[str, Any]],
        ids: list[str],
        *,
        request_timeout_s: float,
        default_max_tokens: int,
        openai_sdk: bool,
        threads: TenantThreads,
        direct: bool = True,
    ) -> None:
        counting.prepare(config.litellm_model for config in model_list.model_list)
        use_openai_sdk(openai_sdk)
        if any(d.litellm_model.startswith(f"{DEMO_PROVIDER}/") for d in model_list.model_list):
            register_demo_provider()
        self.router = TrackingRouter(
            model_list=entries, **_router_kwargs(model_list.router_settings, request_timeout_s)
        )
        # Resolved after the Router registered the model list's prices under deployment ids.
        super().__init__(
            model_list,
            {
                deployment_id: resolve_deployment(config, deployment_id)
                for deployment_id, config in zip(ids, model_list.model_list, strict=True)
            },
            prompt_tokens=PromptTokens(),
            threads=threads,
            default_max_tokens=default_max_tokens,
        )
        endpoints = (
            direct_endpoints(
                model_list, ids, request_timeout_s=request_timeout_s, unchanged=_unchanged
            )
            if direct and not openai_sdk
            else {}
        )
        self._direct = (
            DirectCalls(endpoints, max_connections=MAX_CONNECTIONS) if endpoints else None
        )

    def direct_models(self) -> list[str]:
        """The models whose calls go over HTTP directly."""
        return list(self._direct.endpoints) if self._direct is not None else []

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()

    def supports_response_schema(self, names: list[str]) -> bool:
        return all(_supports_response_schema(d) for name in names for d in self.deployments(name))

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if (route := self._direct_route(request)) is not None:
            assert self._direct is not None
            attempts: list[FailedAttempt] = []
            try:
                answer = await self._direct.complete(request, route, attempts)
            except LLMCallError as exc:
                raise _call_error(exc, attempts) from exc
            return self.answered(request, answer, attempts)
        kwargs = self._call_kwargs(request)
        with tracking_attempts() as attempts:
            try:
                response = await self.router.acompletion(**kwargs)
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
        if (route := self._direct_route(request)) is not None:
            assert self._direct is not None
            attempts: list[FailedAttempt] = []
            try:
                async for event in self._direct.stream(request, route, attempts):
                    if isinstance(event, Answer):
                        yield self.answered(request, event, attempts)
                    else:
                        yield event
            except LLMCallError as exc:
                raise _call_error(exc, attempts) from exc
            return
        kwargs = self._call_kwargs(request)
        kwargs.update(stream=True, stream_options={"include_usage": True})
        with tracking_attempts() as attempts:
            try:
                stream = await self.router.acompletion(**kwargs)
            except Exception as exc:
                raise _call_error(exc, attempts) from exc
        reply = StreamedReply()
        try:
            async for chunk in stream:
                reply.usage = getattr(chunk, "usage", None) or reply.usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                reply.finish_reason = choice.finish_reason or reply.finish_reason
                delta = choice.delta
                for piece in (
                    reply.delta(getattr(delta, "reasoning_content", None), "reasoning"),
                    reply.delta(delta.content),
                ):
                    if piece is not None:
                        yield piece
                for call in delta.tool_calls or []:
                    function = call.function
                    reply.call(
                        call.index,
                        call.id,
                        function.name if function is not None else None,
                        function.arguments if function is not None else None,
                    )
        except Exception as exc:
            raise _call_error(exc, attempts) from exc
        yield self._response(
            request,
            stream,
            content=reply.content,
            reasoning=reply.reasoning,
            tool_calls=reply.tool_calls,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            attempts=attempts,
            streamed=True,
        )

    def _direct_route(self, request: LLMRequest) -> list[Endpoint] | None:
        if self._direct is None:
            return None
        self.deployments(request.model)  # unknown model: refused as by the router
        fallbacks = (
            self.fallbacks(request.model) if request.fallbacks is None else request.fallbacks
        )
        return self._direct.route(request, fallbacks)

    def answered(
        self, request: LLMRequest, answer: Answer, attempts: list[FailedAttempt]
    ) -> LLMResponse:
        """A direct call's answer, its finish reason and usage read as LiteLLM reads them."""
        reason = answer.finish_reason
        return self._priced(
            request,
            self._deployments[answer.endpoint.deployment_id],
            content=answer.content,
            reasoning=answer.reasoning,
            tool_calls=answer.tool_calls,
            finish_reason=None if reason is None else map_finish_reason(reason),
            usage=_usage(answer.usage),
            attempts=attempts,
            litellm_cost=None,
        )

    def _call_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        self.deployments(request.model)  # unknown model: fail before the router does
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            **_NOT_GATEWAY_MCP,
        }
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
        return self._priced(
            request,
            deployment,
            content=content,
            reasoning=reasoning,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            usage=usage,
            attempts=attempts,
            litellm_cost=None if streamed else hidden.get("response_cost"),
        )

    def _priced(
        self,
        request: LLMRequest,
        deployment: Deployment,
        *,
        content: str | None,
        reasoning: str | None,
        tool_calls: list[LLMToolCall],
        finish_reason: str | None,
        usage: Any,
        attempts: list[FailedAttempt],
        litellm_cost: Any,
    ) -> LLMResponse:
        """The response, its cost by the deployment's prices: LiteLLM's own figure when it
        priced the call (`litellm_cost`), else its calculator on the usage."""
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


# LiteLLM loads much of its code on a process's first call (its logging, cost and tool-call
# paths; the tokenizer): a second or so of CPU. One call on the demo model loads it once per
# process, before any task's call would pay for it.
_warming = threading.Lock()
_warmed = threading.Event()


# A call with tools makes LiteLLM look for its proxy's MCP gateway tools among them, which
# imports the MCP SDK on the first (a third of a second of CPU, and its memory, in every
# process) and walks the tools on each: ours are only ever function tools. LiteLLM's own
# internal flag, which it strips before anything is sent.
_NOT_GATEWAY_MCP: dict[str, Any] = {"_skip_mcp_handler": True}


def warm_up() -> None:
    """Runs one call, with a tool, on the in-process demo model, once per process: in an
    event loop of its own, in a thread of its own (the caller's may be running a loop). The
    Router it calls is its own: the gateways' Routers are only called from their users' loops."""
    with _warming:
        if _warmed.is_set():
            return
        register_demo_provider()
        router = Router(
            model_list=[
                {
                    "model_name": DEMO_MODEL,
                    "litellm_params": {"model": f"{DEMO_PROVIDER}/{DEMO_MODEL}"},
                    "model_info": {"id": "warm-up"},
                }
            ],
            num_retries=0,
        )
        tool = {
            "type": "function",
            "function": {
                "name": "noop",
                "description": "Does nothing.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        messages = [{"role": "user", "content": "Say ok."}]
        call = router.acompletion(
            model=DEMO_MODEL, messages=messages, tools=[tool], **_NOT_GATEWAY_MCP
        )
        with ThreadPoolExecutor(1, thread_name_prefix="llm-warm-up") as thread:
            thread.submit(asyncio.run, call).result()
        _warmed.set()


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
    deployment's error."""
    return after_every_attempt(classify(exc), attempts)


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


def _usage(reported: dict[str, Any] | None) -> Usage | None:
    """A provider's usage as LiteLLM reads it; None when it reported none it can read (the
    tokenizer counts it then)."""
    if reported is None:
        return None
    try:
        return Usage(**reported)
    except (ValidationError, TypeError):
        return None


def _unchanged(model: str) -> bool:
    """Whether LiteLLM's OpenAI configuration passes a model's parameters through as they
    are (a model it knows as a plain chat model, or one it does not know)."""
    config = ProviderConfigManager.get_provider_chat_config(
        model=model, provider=LlmProviders.OPENAI
    )
    return type(config).__name__ in ("OpenAIGPTConfig", "OpenAIUnknownModelConfig")
