"""A call's cost: a deployment whose price entry holds only its two per-token prices is priced
without LiteLLM's calculator when the usage is plain, and to the same Decimal as LiteLLM's. A
model LiteLLM's map does not know is resolved without LiteLLM as LiteLLM resolves it."""

import random
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

from app.chain import quantize_usd
from app.llm.config import DEMO_MODEL, ModelList, load_model_list
from app.llm.gateway import LLMGateway, _router_entries
from app.llm.litellm_env import Router, Usage, litellm
from app.llm.model_map import knows
from app.llm.pricing import Deployment, resolve_deployment, resolve_without_litellm
from tests.factories import fake_deployment, gateway_for
from tests.fakes.openai_server import FakeLLMServer

# Prices of many magnitudes, as model lists state them (strings, read as floats).
PRICES = [
    ("0.000001", "0.000002"),
    ("0.0000015", "0.000002"),
    ("0.00000015", "0.0000006"),
    ("0.000003", "0.000015"),
    ("0.00001", "0.00003"),
    ("0.0000000375", "0.00000015"),
    ("0.00006", "0.00012"),
    ("0.0000002", "0.0000002"),
]


def _deployments(fake_llm: FakeLLMServer, tmp_path: Path) -> list[Deployment]:
    entries = [
        fake_deployment(fake_llm, f"m{index}", input_cost=prompt, output_cost=completion)
        for index, (prompt, completion) in enumerate(PRICES)
    ]
    # LiteLLM's side: the Router registers the prices its calculator reads
    gateway = gateway_for(tmp_path, entries, without_litellm=False)
    gateway.load()
    return [gateway.deployments(f"m{index}")[0] for index in range(len(PRICES))]


def _litellms(deployment: Deployment, usage: Usage) -> Decimal:
    prompt, completion = litellm.cost_per_token(
        model=deployment.pricing_key,
        custom_llm_provider=deployment.provider,
        usage_object=usage,
    )
    return quantize_usd(prompt + completion)


def _usage(prompt: int, completion: int, **details: Any) -> Usage:
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        **details,
    )


def test_a_flat_price_costs_a_plain_call_exactly_what_litellms_calculator_says(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    deployments = _deployments(fake_llm, tmp_path)
    assert all(d.flat_price is not None for d in deployments)
    draw = random.Random(32)
    compared = 0
    for _ in range(3000):
        deployment = draw.choice(deployments)
        prompt, completion = draw.randint(0, 2_000_000), draw.randint(0, 200_000)
        # As providers report it: without details, or with details that are all zero.
        zeros = {
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        usage = _usage(prompt, completion, **(zeros if draw.random() < 0.5 else {}))
        assert deployment.cost(usage) == _litellms(deployment, usage), (deployment, usage)
        compared += 1
    assert compared == 3000
    # The small counts of real calls, every one of them for one price.
    deployment = deployments[1]
    for prompt in range(0, 300, 7):
        for completion in range(0, 300, 11):
            usage = _usage(prompt, completion)
            assert deployment.cost(usage) == _litellms(deployment, usage)


def test_usage_that_is_not_plain_is_priced_by_litellm(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    deployment = _deployments(fake_llm, tmp_path)[0]
    unplain = [
        _usage(1000, 50, prompt_tokens_details={"cached_tokens": 400}),
        _usage(1000, 500, completion_tokens_details={"reasoning_tokens": 300}),
        _usage(1000, 50, prompt_tokens_details={"text_tokens": 600, "audio_tokens": 400}),
        _usage(1000, 50, cache_creation_input_tokens=200),
    ]
    for usage in unplain:
        assert deployment.cost(usage) == _litellms(deployment, usage), usage
    # A text count apart from the total is LiteLLM's to interpret: here it bills 600 tokens.
    partial = _usage(1000, 50, prompt_tokens_details={"text_tokens": 600})
    assert deployment.cost(partial) == _litellms(deployment, partial)


def test_an_entry_with_any_other_price_is_priced_by_litellm_alone(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    cached = fake_deployment(fake_llm, "cached", input_cost="0.000001", output_cost="0.000002")
    cached["model_info"]["cache_read_input_token_cost"] = 0.0000001
    mapped = {
        "model_name": "mapped",
        "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": fake_llm.base_url},
    }
    gateway = gateway_for(tmp_path, [cached, mapped], without_litellm=False)
    gateway.load()
    [with_cache] = gateway.deployments("cached")
    [from_map] = gateway.deployments("mapped")
    assert with_cache.priced
    assert with_cache.flat_price is None
    assert from_map.priced
    assert from_map.flat_price is None
    usage = _usage(1000, 50, prompt_tokens_details={"cached_tokens": 400})
    assert with_cache.cost(usage) == _litellms(with_cache, usage)
    # The cache's own price, not the input price, for the 400 cached tokens.
    assert with_cache.cost(usage) == quantize_usd(
        Decimal("0.000001") * 600 + Decimal("0.0000001") * 400 + Decimal("0.000002") * 50
    )


UNKNOWN_TO_THE_MAP: list[dict[str, Any]] = [
    {"model": "openai/fake-model"},
    {"model": "openai/fake-model", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
    {"model": "openai/llama-local", "input_cost_per_token": 3e-7},  # half a price: unpriced
    {
        "model": "openai/qwen-local",
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 1e-6,
        "supports_function_calling": True,
        "supports_vision": True,
        "max_input_tokens": 32768,
        "max_output_tokens": 4096,
    },
    {"model": "openai/org/some-model", "supports_function_calling": False, "id": "mine"},
    {"model": "openai/int-priced", "input_cost_per_token": 0, "output_cost_per_token": 1},
]
LITELLMS_TO_RESOLVE: list[dict[str, Any]] = [
    {"model": "openai/gpt-4o", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
    {"model": "openai/gpt-4o-mini"},
    {"model": "gpt-4o"},
    {"model": "anthropic/fake-model"},
    {"model": "openai/fake-model", "base_model": "gpt-4o"},
    {"model": "openai/fake-model", "cache_read_input_token_cost": 1e-7},
]


def _own(model: str) -> str:
    """A name of its own for a model the map does not know: a Router registers the names of
    its model list in LiteLLM's map, which is the process's (another test's claims about
    `openai/fake-model` would be LiteLLM's answer here)."""
    return (
        model
        if knows(model.partition("/")[2]) or "/" not in model
        else f"{model}-{uuid4().hex[:8]}"
    )


def _resolved_both_ways(
    entries: list[dict[str, Any]],
) -> list[tuple[Deployment, Deployment | None]]:
    model_list = ModelList.model_validate(
        {
            "model_list": [
                {
                    # names of their own: LiteLLM's map is the process's, deployment ids its keys
                    "model_name": f"resolved-{uuid4().hex[:8]}",
                    "litellm_params": {
                        "model": _own(entry.pop("model")),
                        "api_base": "http://x/v1",
                    },
                    "model_info": entry,
                }
                for index, entry in enumerate(entries)
            ]
        }
    )
    routed, ids = _router_entries(model_list)
    Router(model_list=routed)  # registers the model list's prices, as the backend's does
    return [
        (resolve_deployment(config, deployment_id), resolve_without_litellm(config, deployment_id))
        for config, deployment_id in zip(model_list.model_list, ids, strict=True)
    ]


def test_a_model_the_map_does_not_know_is_resolved_without_litellm_as_litellm_does() -> None:
    for by_litellm, without in _resolved_both_ways([dict(e) for e in UNKNOWN_TO_THE_MAP]):
        assert without == by_litellm


def test_a_model_the_map_knows_or_one_described_otherwise_is_litellms_to_resolve() -> None:
    for _, without in _resolved_both_ways([dict(e) for e in LITELLMS_TO_RESOLVE]):
        assert without is None


def test_the_demo_model_is_resolved_without_litellm_as_litellm_does() -> None:
    model_list = load_model_list(None)
    gateway = LLMGateway(model_list)
    gateway.load()
    [config] = model_list.model_list
    assert resolve_without_litellm(config, DEMO_MODEL) == gateway.deployments(DEMO_MODEL)[0]
