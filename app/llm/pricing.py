"""What each deployment is, what it costs, and what a call will likely cost.

A deployment is priced when its model list entry gives per-token prices (registered in
LiteLLM's price map under the deployment id by the Router) or LiteLLM's own map knows its
model. Otherwise it is unpriced: its calls record cost None, never a silent 0.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.chain import quantize_usd
from app.llm.config import DEMO_PROVIDER, DeploymentConfig
from app.llm.model_map import knows
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
    # Its per-token prices (input, output) when they are all its price entry says: a call
    # with plain usage then costs what LiteLLM's calculator would say, without asking it.
    flat_price: tuple[float, float] | None = None

    @property
    def priced(self) -> bool:
        return self.pricing_key is not None

    def cost(self, usage: Any) -> Decimal | None:
        """Cost of a call from its usage (a LiteLLM `Usage`), by LiteLLM's price calculator."""
        if self.pricing_key is None:
            return None
        if self.flat_price is not None and _plain(usage):
            return self._flat(usage.prompt_tokens, usage.completion_tokens)
        from app.llm.litellm_env import litellm

        prompt, completion = litellm.cost_per_token(
            model=self.pricing_key, custom_llm_provider=self.provider, usage_object=usage
        )
        return quantize_usd(prompt + completion)

    def cost_of_tokens(self, input_tokens: int, output_tokens: int) -> Decimal | None:
        """Cost of a call of plain usage (text tokens alone): without LiteLLM at a flat
        price."""
        if self.pricing_key is None:
            return None
        if self.flat_price is not None:
            return self._flat(input_tokens, output_tokens)
        from app.llm.litellm_env import Usage

        return self.cost(
            Usage(
                prompt_tokens=input_tokens,
                completion_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            )
        )

    def _flat(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        # The same floats, multiplied and added in the same order, as LiteLLM's.
        assert self.flat_price is not None
        prompt_price, completion_price = self.flat_price
        return quantize_usd(
            float(prompt_tokens) * prompt_price + float(completion_tokens) * completion_price
        )


def resolve_deployment(config: DeploymentConfig, deployment_id: str) -> Deployment:
    """Builds a `Deployment` once the Router has registered the model list's prices."""
    from app.llm.litellm_env import litellm

    litellm_model = config.litellm_model
    try:
        provider = litellm.get_llm_provider(model=litellm_model)[1]
    except Exception:  # LiteLLM raises a bare BadRequestError for unknown providers
        provider = litellm_model.split("/", 1)[0]
    key = deployment_id if config.has_custom_price else litellm_model
    supports = config.model_info.get("supports_function_calling")
    if supports is None:
        supports = _supports_function_calling(litellm_model, provider)
    vision = config.model_info.get("supports_vision")
    if vision is None:
        vision = _supports_vision(litellm_model, provider)
    entry = _price_entry(key, provider)
    return _deployment(config, deployment_id, provider, key, entry, bool(supports), bool(vision))


def _deployment(
    config: DeploymentConfig,
    deployment_id: str,
    provider: str,
    key: str,
    entry: dict[str, Any] | None,
    supports_tools: bool,
    supports_vision: bool,
) -> Deployment:
    """The deployment whose price entry (under `key`) is `entry`."""
    price = _price(entry)
    info, listed = config.model_info, entry or {}
    max_output = info.get("max_output_tokens") or listed.get("max_output_tokens")
    max_input = info.get("max_input_tokens") or listed.get("max_input_tokens")
    return Deployment(
        id=deployment_id,
        model_name=config.model_name,
        litellm_model=config.litellm_model,
        provider=provider,
        pricing_key=key if price is not None else None,
        price=price,
        supports_tools=supports_tools,
        max_output_tokens=int(max_output) if max_output else None,
        max_input_tokens=int(max_input) if max_input else None,
        supports_vision=supports_vision,
        flat_price=_flat_price(entry) if price is not None else None,
    )


# What a model list entry may say of a model LiteLLM's map does not know for it to be resolved
# without LiteLLM (the Router registers it as it is; `base_model`, a `mode` or another price
# would make LiteLLM merge or price it its own way).
_DESCRIBED_KEYS = frozenset(
    {
        "id",
        "input_cost_per_token",
        "output_cost_per_token",
        "supports_function_calling",
        "supports_vision",
        "max_input_tokens",
        "max_output_tokens",
    }
)


def resolve_without_litellm(config: DeploymentConfig, deployment_id: str) -> Deployment | None:
    """`resolve_deployment`'s deployment, without LiteLLM, for an `openai/` model that
    LiteLLM's map does not know (a self-hosted model), or the demo model: described by its
    model list entry alone, as LiteLLM would describe it. None for any other, which LiteLLM
    resolves."""
    litellm_model = config.litellm_model
    provider, _, name = litellm_model.partition("/")
    info = config.model_info
    if provider == DEMO_PROVIDER:  # the in-process demo model: described by its entry
        if not set(info) <= _DESCRIBED_KEYS | {"mode"}:
            return None
    elif (
        provider != "openai"
        or not name
        or knows(name)
        or knows(litellm_model)
        or not set(info) <= _DESCRIBED_KEYS
    ):
        return None
    # Registered in LiteLLM's map, prices are floats.
    entry = (
        {k: float(v) if k in _FLAT_KEYS and type(v) is int else v for k, v in info.items()}
        if config.has_custom_price
        else None
    )
    supports_tools = bool(info.get("supports_function_calling"))
    vision = bool(info.get("supports_vision"))
    return _deployment(
        config, deployment_id, provider, deployment_id, entry, supports_tools, vision
    )


def _price_entry(key: str, provider: str) -> dict[str, Any] | None:
    from app.llm.litellm_env import litellm

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


_FLAT_KEYS = ("input_cost_per_token", "output_cost_per_token")
# Words of the model map's keys that price something (a cache, a modality, a tier, a batch, an
# hour of the day, a region): an entry with any other such key is priced by LiteLLM alone.
_PRICE_WORDS = ("cost", "pric", "tier", "uplift", "multiplier", "discount", "peak")


def _flat_price(entry: dict[str, Any] | None) -> tuple[float, float] | None:
    if entry is None:
        return None
    for key, value in entry.items():
        if key not in _FLAT_KEYS and value is not None and any(w in key for w in _PRICE_WORDS):
            return None
    prompt, completion = (entry.get(key) for key in _FLAT_KEYS)
    if type(prompt) is not float or type(completion) is not float:
        return None
    return prompt, completion


def _plain(usage: Any) -> bool:
    """Whether `usage` counts text tokens only: no cached, cache-writing, reasoning, audio,
    image or video tokens, and no text count apart from its total."""
    from app.llm.litellm_env import Usage

    if not isinstance(usage, Usage) or usage.prompt_tokens is None:
        return False
    if getattr(usage, "cache_creation_input_tokens", None) or getattr(
        usage, "cache_read_input_tokens", None
    ):
        return False
    for details, total in (
        (usage.prompt_tokens_details, usage.prompt_tokens),
        (usage.completion_tokens_details, usage.completion_tokens),
    ):
        if details is None:
            continue
        for name, value in details:
            if name == "text_tokens":
                if value not in (None, 0, total):
                    return False
            elif value:
                return False
    return True


def _supports_function_calling(model: str, provider: str) -> bool:
    from app.llm.litellm_env import litellm

    try:
        return bool(litellm.supports_function_calling(model=model, custom_llm_provider=provider))
    except Exception:  # unknown model: assume plain chat
        return False


def _supports_vision(model: str, provider: str) -> bool:
    from app.llm.litellm_env import litellm

    try:
        return bool(litellm.supports_vision(model=model, custom_llm_provider=provider))
    except Exception:  # unknown model: assume text only
        return False
