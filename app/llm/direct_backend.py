"""A model list served without LiteLLM: every deployment an OpenAI-compatible server's model
that LiteLLM's map does not know (a self-hosted model, priced by the model list or not), and
the demo model.

Such deployments LiteLLM would only relay (`app.llm.direct`), describe from their model list
entries (`resolve_without_litellm`), count as it counts (`app.llm.counting`) and price at
their flat prices: all of it is done here as LiteLLM does it, and LiteLLM (about 160 MB, and
seconds of CPU) is not imported. What only LiteLLM does is left to it, loaded in the
background the first time it is needed, the call waiting for it: a call of the demo model, a
request LiteLLM would rewrite, a prompt part only it counts (an image), a usage report only
it reads (cached or reasoning tokens, prices of another kind), a finish reason other than
OpenAI's own.
"""

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from app.bulkheads import TenantThreads
from app.chain import FailedAttempt
from app.llm import counting
from app.llm.config import DEMO_PROVIDER, ModelList
from app.llm.connections import MAX_CONNECTIONS
from app.llm.counting import NotCounted
from app.llm.direct import Answer, DirectCalls, Endpoint, direct_endpoints
from app.llm.errors import LLMCallError, after_every_attempt
from app.llm.groups import DeploymentGroups
from app.llm.loading import BackgroundLoad
from app.llm.model_map import knows
from app.llm.pricing import Deployment, resolve_without_litellm
from app.llm.tokens import PromptTokens
from app.llm.types import LLMDelta, LLMEstimate, LLMRequest, LLMResponse, LLMToolCall

if TYPE_CHECKING:
    from app.llm.backend import LiteLLMBackend

# The finish reasons OpenAI's API gives, which LiteLLM passes on as they are.
_OPENAI_REASONS = frozenset({"stop", "length", "tool_calls", "function_call", "content_filter"})
# Names LiteLLM's OpenAI configuration treats as its reasoning models whatever else it knows.
_REASONING_SERIES = ("gpt-5", "gpt-6")
_COUNTS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})
_DETAILS = frozenset({"prompt_tokens_details", "completion_tokens_details"})


def serves_without_litellm(
    model_list: ModelList, ids: list[str], *, request_timeout_s: float
) -> tuple[dict[str, Deployment], dict[str, Endpoint]] | None:
    """The model list's deployments (by id) and the endpoints of its models (by name) when
    all of them can be served here (called directly, or the demo model); None when one needs
    LiteLLM."""
    endpoints = direct_endpoints(
        model_list, ids, request_timeout_s=request_timeout_s, unchanged=_unchanged
    )
    deployments: dict[str, Deployment] = {}
    for config, deployment_id in zip(model_list.model_list, ids, strict=True):
        deployment = resolve_without_litellm(config, deployment_id)
        if deployment is None:
            return None
        if config.model_name not in endpoints and deployment.provider != DEMO_PROVIDER:
            return None  # a deployment LiteLLM calls (load-balanced, rate-limited, ...)
        deployments[deployment_id] = deployment
    return deployments, endpoints


def _unchanged(model: str) -> bool:
    """LiteLLM's OpenAI configuration passes the parameters of a model it does not know
    through as they are, unless its name makes it one of OpenAI's reasoning models."""
    return not knows(model) and not any(marker in model for marker in _REASONING_SERIES)


class DirectBackend(DeploymentGroups):
    """`LiteLLMBackend`'s contract, without LiteLLM (see the module); `litellm` loads the
    LiteLLM backend for what only it does."""

    def __init__(
        self,
        model_list: ModelList,
        deployments: dict[str, Deployment],
        endpoints: dict[str, Endpoint],
        *,
        default_max_tokens: int,
        threads: TenantThreads,
        litellm: BackgroundLoad["LiteLLMBackend"],
    ) -> None:
        super().__init__(
            model_list,
            deployments,
            prompt_tokens=PromptTokens(litellm_counts=False),
            threads=threads,
            default_max_tokens=default_max_tokens,
        )
        self._litellm = litellm
        self._direct = DirectCalls(endpoints, max_connections=MAX_CONNECTIONS)
        counting.prepare(config.litellm_model for config in model_list.model_list)

    def direct_models(self) -> list[str]:
        return list(self._direct.endpoints)

    async def aclose(self) -> None:
        await self._direct.aclose()
        if self._litellm.built():
            await self._litellm.result().aclose()

    def supports_response_schema(self, names: list[str]) -> bool:
        """LiteLLM knows of no JSON Schema support of a model its map does not know."""
        for name in names:
            self.deployments(name)
        return False

    async def complete(self, request: LLMRequest) -> LLMResponse:
        route = self._route(request)
        if route is None:
            return await (await self._litellm.wait()).complete(request)
        attempts: list[FailedAttempt] = []
        try:
            answer = await self._direct.complete(request, route, attempts)
        except LLMCallError as exc:
            raise after_every_attempt(exc, attempts) from exc
        return await self._answered(request, answer, attempts)

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMDelta | LLMResponse]:
        route = self._route(request)
        if route is None:
            async for event in (await self._litellm.wait()).stream(request):
                yield event
            return
        attempts: list[FailedAttempt] = []
        try:
            async for piece in self._direct.stream(request, route, attempts):
                if isinstance(piece, Answer):
                    yield await self._answered(request, piece, attempts)
                else:
                    yield piece
        except LLMCallError as exc:
            raise after_every_attempt(exc, attempts) from exc

    async def estimate(
        self, request: LLMRequest, *, added_input_tokens: int, tenant_id: str | None
    ) -> LLMEstimate:
        if not any(d.priced and d.flat_price is None for d in self.candidates(request)):
            try:
                return await super().estimate(
                    request, added_input_tokens=added_input_tokens, tenant_id=tenant_id
                )
            except NotCounted:
                pass
        return await self._by_litellm_estimate(request, added_input_tokens, tenant_id)

    async def _by_litellm_estimate(
        self, request: LLMRequest, added_input_tokens: int, tenant_id: str | None
    ) -> LLMEstimate:
        backend = await self._litellm.wait()
        return await backend.estimate(
            request, added_input_tokens=added_input_tokens, tenant_id=tenant_id
        )

    def _route(self, request: LLMRequest) -> list[Endpoint] | None:
        self.deployments(request.model)  # unknown model: refused as by the router
        fallbacks = (
            self.fallbacks(request.model) if request.fallbacks is None else request.fallbacks
        )
        return self._direct.route(request, fallbacks)

    async def _answered(
        self, request: LLMRequest, answer: Answer, attempts: list[FailedAttempt]
    ) -> LLMResponse:
        """The answer, its usage and cost read as LiteLLM reads them: here when they are
        plain, else by LiteLLM."""
        deployment = self._deployments[answer.endpoint.deployment_id]
        reason = answer.finish_reason
        counts = _plain_counts(answer.usage)
        if (reason is not None and reason not in _OPENAI_REASONS) or counts is None:
            return (await self._litellm.wait()).answered(request, answer, attempts)
        if not counts[0]:  # none reported: counted as LiteLLM counts it
            try:
                counts = self._counted(deployment, request, answer.content, answer.tool_calls)
            except NotCounted:
                return (await self._litellm.wait()).answered(request, answer, attempts)
        if deployment.priced and deployment.flat_price is None:
            return (await self._litellm.wait()).answered(request, answer, attempts)
        cost = deployment.cost_of_tokens(*counts)
        return LLMResponse(
            content=answer.content,
            tool_calls=answer.tool_calls,
            finish_reason=reason,
            model=deployment.model_name,
            deployment=deployment.id,
            provider=deployment.provider,
            input_tokens=counts[0],
            output_tokens=counts[1],
            cost_usd=cost,
            unpriced=cost is None,
            failed_attempts=list(attempts),
            reasoning=answer.reasoning,
        )

    def _counted(
        self,
        deployment: Deployment,
        request: LLMRequest,
        content: str | None,
        calls: list[LLMToolCall],
    ) -> tuple[int, int]:
        """Usage as LiteLLM's tokenizer counts it, for a provider that reported none (the
        prompt's messages counted once, in the estimate's cache)."""
        model = deployment.litellm_model
        prompt = self._prompt_tokens.count(model, request.messages, request.tools)
        text = (content or "") + "".join(call.name + call.arguments for call in calls)
        return prompt, counting.count_text(model, text) if text else 0


def _plain_counts(usage: dict[str, Any] | None) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a usage report of text tokens alone ((0, 0) for none);
    None for one only LiteLLM reads (cached, reasoning, audio tokens; anything else)."""
    if usage is None:
        return 0, 0
    for key, value in usage.items():
        if key in _COUNTS:
            if value is not None and (type(value) is not int or value < 0):
                return None
        elif key in _DETAILS:
            if value is not None and (
                not isinstance(value, dict) or any(v not in (None, 0) for v in value.values())
            ):
                return None
        elif value is not None:
            return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None or completion is None:
        return None if prompt or completion else (0, 0)
    return prompt, completion
