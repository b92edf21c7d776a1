"""What both backends of the gateway share: a model list's deployments by model name, each
model's fallbacks, and the estimate of a call over them."""

import json

from app.bulkheads import TenantThreads
from app.llm.config import ModelList
from app.llm.errors import UnknownModelError
from app.llm.pricing import Deployment
from app.llm.tokens import PromptTokens
from app.llm.types import LLMEstimate, LLMRequest


class DeploymentGroups:
    """A model list's deployments (by id, and by model name) and fallbacks; estimates count
    prompts with `prompt_tokens`, large ones in the tenant's `threads`."""

    def __init__(
        self,
        model_list: ModelList,
        deployments: dict[str, Deployment],
        *,
        prompt_tokens: PromptTokens,
        threads: TenantThreads,
        default_max_tokens: int,
    ) -> None:
        self._deployments = deployments
        self._fallbacks = model_list.fallbacks()
        self._groups: dict[str, list[Deployment]] = {name: [] for name in model_list.model_names()}
        for deployment in deployments.values():
            self._groups[deployment.model_name].append(deployment)
        self._prompt_tokens = prompt_tokens
        self._threads = threads
        self._default_max_tokens = default_max_tokens

    def deployments(self, model: str) -> list[Deployment]:
        try:
            return self._groups[model]
        except KeyError:
            raise UnknownModelError(model, list(self._groups)) from None

    def fallbacks(self, model: str) -> list[str]:
        return self._fallbacks.get(model, [])

    def candidates(self, request: LLMRequest) -> list[Deployment]:
        """The deployments that may answer the request, its model's first."""
        fallbacks = (
            self.fallbacks(request.model) if request.fallbacks is None else request.fallbacks
        )
        return [d for name in [request.model, *fallbacks] for d in self.deployments(name)]

    async def estimate(
        self, request: LLMRequest, *, added_input_tokens: int, tenant_id: str | None
    ) -> LLMEstimate:
        candidates = self.candidates(request)
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
        max_output = request.max_tokens or self._default_max_tokens
        costs = [d.cost_of_tokens(input_tokens, max_output) for d in candidates]
        priced = [c for c in costs if c is not None]
        return LLMEstimate(
            input_tokens=input_tokens,
            max_output_tokens=max_output,
            cost_usd=max(priced) if len(priced) == len(costs) else None,
        )
