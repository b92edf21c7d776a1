"""What each deployment is, what it costs, and what a call will likely cost.

A deployment is priced when its model list entry gives per-token prices (registered in
LiteLLM's price map under the deployment id by the Router) or LiteLLM's own map knows its
model. Otherwise it is unpriced: its calls record cost None, never a silent 0.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.chain import quantize_usd
from app.llm.config import DeploymentConfig
from app.llm.litellm_env import Usage, litellm
from app.llm.types import ModelPrice


@dataclass(frozen=True, slots=True)
class Deployment:
    """A resolved model list entry."""

    id: str
    model_name: str
    litellm_model: str
    provider: str
    pricing_key: str | None
    price: ModelPrice | None
    supports_tools: bool
    max_output_tokens: int | None
    # Whether it takes images in messages (model list `model_info.supports_vision`, else
    # LiteLLM's model map).
    supports_vision: bool = False
    # The most prompt tokens it takes (model list `model_info.max_input_tokens`, else
    # LiteLLM's model map); None: not known.
    max_input_tokens: int | None = None

    @property
    def priced(self) -> bool:
        return self.pricing_key is not None

    def cost(self, usage: Any) -> Decimal | None:
        """Cost of a call from its usage (a LiteLLM `Usage`), by LiteLLM's price calculator."""
        if self.pricing_key is None:
            return None
        prompt, completion = litellm.cost_per_token(
            model=self.pricing_key, custom_llm_provider=self.provider, usage_object=usage
        )
        return quantize_usd(prompt + completion)

    def cost_of_tokens(self, input_tokens: int, output_tokens: int) -> Decimal | None:
        return self.cost(
            Usage(
                prompt_tokens=input_tokens,
                completion_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            )
        )


def resolve_deployment(config: DeploymentConfig, deployment_id: str) -> Deployment:
    """Builds a `Deployment` once the Router has registered the model list's prices."""
    litellm_model = config.litellm_model
    try:
        provider = litellm.get_llm_provider(model=litellm_model)[1]
    except Exception:  # LiteLLM raises a bare BadRequestError for unknown providers
        provider = litellm_model.split("/", 1)[0]
    key = deployment_id if config.has_custom_price else litellm_model
    entry = _price_entry(key, provider)
    price = _price(entry)
    supports = config.model_info.get("supports_function_calling")
    if supports is None:
        supports = _supports_function_calling(litellm_model, provider)
    vision = config.model_info.get("supports_vision")
    if vision is None:
        vision = _supports_vision(litellm_model, provider)
    max_output = config.model_info.get("max_output_tokens") or (entry or {}).get(
        "max_output_tokens"
    )
    max_input = config.model_info.get("max_input_tokens") or (entry or {}).get("max_input_tokens")
    return Deployment(
        id=deployment_id,
        model_name=config.model_name,
        litellm_model=litellm_model,
        provider=provider,
        pricing_key=key if price is not None else None,
        price=price,
        supports_tools=bool(supports),
        max_output_tokens=int(max_output) if max_output else None,
        max_input_tokens=int(max_input) if max_input else None,
        supports_vision=bool(vision),
    )


def _price_entry(key: str, provider: str) -> dict[str, Any] | None:
    entry = litellm.model_cost.get(key)
    if isinstance(entry, dict):
        return entry
    try:
        info = litellm.get_model_info(model=key, custom_llm_provider=provider)
    except Exception:  # not in the map: unpriced
        return None
    return dict(info)


def _price(entry: dict[str, Any] | None) -> ModelPrice | None:
    if entry is None:
        return None
    prompt, completion = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return ModelPrice(
        input_cost_per_token=Decimal(str(prompt)), output_cost_per_token=Decimal(str(completion))
    )


def _supports_function_calling(model: str, provider: str) -> bool:
    try:
        return bool(litellm.supports_function_calling(model=model, custom_llm_provider=provider))
    except Exception:  # unknown model: assume plain chat
        return False


def _supports_vision(model: str, provider: str) -> bool:
    try:
        return bool(litellm.supports_vision(model=model, custom_llm_provider=provider))
    except Exception:  # unknown model: assume text only
        return False
