"""The gateway through LiteLLM's real HTTP path to the fake server: cost, fallbacks, streaming."""

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.chain import FailedAttempt
from app.llm import (
    LLMCallError,
    LLMDelta,
    LLMErrorKind,
    LLMGateway,
    LLMRequest,
    LLMResponse,
    UnknownModelError,
    load_model_list,
)
from app.llm.direct_backend import DirectBackend
from app.llm.litellm_env import litellm
from app.llm.model_map import knows
from tests import factories
from tests.factories import fake_deployment, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

HELLO = [{"role": "user", "content": "hello"}]

GatewayFor = Callable[..., LLMGateway]


@pytest.fixture(params=["without-litellm", "direct", "litellm"])
def gateway_for(request: pytest.FixtureRequest) -> GatewayFor:
    """Every contract below holds for each path of a call: over HTTP directly without LiteLLM
    (for models its map does not know), over HTTP directly beside LiteLLM, and through
    LiteLLM's Router. The gateway it builds says which one its calls took."""
    direct = request.param != "litellm"
    without_litellm = request.param == "without-litellm"

    def build(*args: Any, **kwargs: Any) -> LLMGateway:
        gateway = factories.gateway_for(
            *args, direct=direct, without_litellm=without_litellm, **kwargs
        )
        gateway.load()
        deployments = kwargs.get("deployments") or args[1]
        models = {d["model_name"] for d in deployments if "rpm" not in d["litellm_params"]}
        assert set(gateway.direct_models()) == (models if direct else set())
        unmapped = all(
            not knows(d["litellm_params"]["model"].removeprefix("openai/")) for d in deployments
        )
        served_here = without_litellm and unmapped and len(models) == len(deployments)
        assert isinstance(gateway._backend.result(), DirectBackend) is served_here
        return gateway

    return build


async def test_cost_is_exactly_the_model_lists_prices_times_the_reported_tokens(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [
            fake_deployment(
                fake_llm,
                "priced",
                input_cost="0.0000015",
                output_cost="0.000002",
                deployment_id="priced-eu",
            )
        ],
    )
    fake_llm.script("priced", Reply.text("hi", prompt_tokens=1234, completion_tokens=567))

    response = await gateway.complete(LLMRequest(model="priced", messages=HELLO))

    assert response.content == "hi"
    assert (response.input_tokens, response.output_tokens) == (1234, 567)
    assert response.cost_usd == Decimal("0.0000015") * 1234 + Decimal("0.000002") * 567
    assert not response.unpriced
    assert (response.model, response.deployment, response.provider) == (
        "priced",
        "priced-eu",
        "openai",
    )
    assert fake_llm.requests[0].headers["authorization"] == "Bearer fake-key"  # os.environ/


async def test_a_model_in_litellms_price_map_is_priced_from_the_map(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "mini", upstream="gpt-4o-mini")])
    fake_llm.script("gpt-4o-mini", Reply.text("hi", prompt_tokens=1000, completion_tokens=100))

    response = await gateway.complete(LLMRequest(model="mini", messages=HELLO))

    prices = litellm.model_cost["gpt-4o-mini"]
    expected = (
        Decimal(str(prices["input_cost_per_token"])) * 1000
        + Decimal(str(prices["output_cost_per_token"])) * 100
    )
    assert response.cost_usd == expected
    assert response.cost_usd > 0


async def test_a_model_with_no_known_price_records_no_cost_and_is_flagged(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "mystery-model-7b")])
    fake_llm.script("mystery-model-7b", Reply.text("hi", prompt_tokens=50, completion_tokens=5))

    response = await gateway.complete(LLMRequest(model="mystery-model-7b", messages=HELLO))

    assert response.cost_usd is None
    assert response.unpriced
    assert (response.input_tokens, response.output_tokens) == (50, 5)
    [deployment] = gateway.deployments("mystery-model-7b")
    assert deployment.price is None


@pytest.mark.parametrize(
    ("failure", "error_class", "status_code"),  # LiteLLM reports a timeout as 408
    [
        (Reply.error(500, "upstream exploded"), "transient", 500),
        (Reply.error(429, "too many requests", error_type="rate_limit_error"), "rate_limit", 429),
        (Reply.text("too late", delay_s=2.0), "timeout", 408),
    ],
    ids=["500", "429", "timeout"],
)
async def test_a_failing_deployment_falls_back_and_both_are_recorded(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    failure: Reply,
    error_class: str,
    status_code: int,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [
            fake_deployment(fake_llm, "primary", deployment_id="primary-a", timeout_s=0.3),
            fake_deployment(
                fake_llm,
                "backup",
                deployment_id="backup-b",
                input_cost="0.000001",
                output_cost="0.000002",
            ),
        ],
        fallbacks={"primary": ["backup"]},
    )
    fake_llm.script("primary", failure)
    fake_llm.script("backup", Reply.text("from backup", prompt_tokens=10, completion_tokens=5))

    response = await gateway.complete(LLMRequest(model="primary", messages=HELLO))

    assert response.content == "from backup"
    assert (response.model, response.deployment) == ("backup", "backup-b")
    assert response.cost_usd == Decimal("0.000001") * 10 + Decimal("0.000002") * 5
    [attempt] = response.failed_attempts
    assert (attempt.deployment, attempt.model, attempt.error_class, attempt.status_code) == (
        "primary-a",
        "primary",
        error_class,
        status_code,
    )
    assert [r.model for r in fake_llm.requests] == ["primary", "backup"]  # one request each


async def test_when_every_deployment_fails_the_error_lists_each_attempt(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [fake_deployment(fake_llm, "primary"), fake_deployment(fake_llm, "backup")],
        fallbacks={"primary": ["backup"]},
    )
    fake_llm.script("primary", Reply.error(503, "overloaded"))
    fake_llm.script("backup", Reply.error(429, "slow down", headers={"retry-after": "7"}))

    with pytest.raises(LLMCallError) as raised:
        await gateway.complete(LLMRequest(model="primary", messages=HELLO))

    error = raised.value
    assert error.kind.retryable
    assert [(a.deployment, a.error_class, a.status_code) for a in error.failed_attempts] == [
        ("primary#1", "transient", 503),
        ("backup#1", "rate_limit", 429),
    ]


async def test_a_rate_limit_carries_the_servers_retry_after(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "solo")])
    fake_llm.script("solo", Reply.error(429, "slow down", headers={"retry-after": "7"}))

    with pytest.raises(LLMCallError) as raised:
        await gateway.complete(LLMRequest(model="solo", messages=HELLO))

    assert raised.value.kind is LLMErrorKind.RATE_LIMIT
    assert raised.value.retry_after_s == 7.0
    assert raised.value.status_code == 429


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, LLMErrorKind.BAD_REQUEST),
        (401, LLMErrorKind.AUTHENTICATION),
        (404, LLMErrorKind.NOT_FOUND),
    ],
)
async def test_client_errors_are_classified_as_not_retryable(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    status: int,
    kind: LLMErrorKind,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "solo")])
    fake_llm.script("solo", Reply.error(status, "no", error_type="invalid_request_error"))

    with pytest.raises(LLMCallError) as raised:
        await gateway.complete(LLMRequest(model="solo", messages=HELLO))

    assert raised.value.kind is kind
    assert not raised.value.kind.retryable
    assert len(fake_llm.requests) == 1  # the SDK underneath does not retry on its own


async def test_tools_and_options_reach_the_provider_and_tool_calls_come_back(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "tooly", native_tools=True)])
    fake_llm.script(
        "tooly",
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "2+2"}, id="c1"), ToolCall("x-y", "{bad")]
        ),
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
            },
        }
    ]

    response = await gateway.complete(
        LLMRequest(
            model="tooly",
            messages=HELLO,
            tools=tools,
            tool_choice="auto",
            temperature=0.1,
            max_tokens=50,
            stop=["\nObservation:"],
        )
    )

    body = fake_llm.requests[0].body
    assert body["tools"] == tools
    assert body["tool_choice"] == "auto"
    # No internal flag reaches the provider (LiteLLM strips its own, `_skip_mcp_handler`).
    assert [key for key in body if key.startswith("_")] == []
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.1, 50, ["\nObservation:"])
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "calculator", '{"expression": "2+2"}'),
        ("call_1", "x-y", "{bad"),
    ]
    assert response.finish_reason == "tool_calls"
    assert gateway.supports_native_tools("tooly")


async def test_streaming_yields_deltas_then_the_same_response_as_a_plain_call(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [fake_deployment(fake_llm, "s", input_cost="0.000003", output_cost="0.000004")],
    )
    text = "The quick brown fox jumps over the lazy dog."
    fake_llm.script(
        "s",
        Reply.text(text, prompt_tokens=21, completion_tokens=9),
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6*7"}, id="t1")],
            prompt_tokens=30,
            completion_tokens=12,
        ),
    )

    events = [e async for e in gateway.stream(LLMRequest(model="s", messages=HELLO))]
    deltas = [e.text for e in events if isinstance(e, LLMDelta)]
    final = events[-1]
    assert isinstance(final, LLMResponse)
    assert len(deltas) > 1
    assert "".join(deltas) == text == final.content
    assert (final.input_tokens, final.output_tokens) == (21, 9)
    assert final.cost_usd == Decimal("0.000003") * 21 + Decimal("0.000004") * 9
    assert fake_llm.requests[0].body["stream_options"] == {"include_usage": True}

    events = [e async for e in gateway.stream(LLMRequest(model="s", messages=HELLO))]
    final = events[-1]
    assert isinstance(final, LLMResponse)
    assert [(c.id, c.name, c.arguments) for c in final.tool_calls] == [
        ("t1", "calculator", '{"expression": "6*7"}')
    ]
    assert final.cost_usd == Decimal("0.000003") * 30 + Decimal("0.000004") * 12


async def test_a_provider_that_reports_no_usage_is_counted_with_the_tokenizer(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [fake_deployment(fake_llm, "quiet", input_cost="0.000001", output_cost="0.000001")],
    )
    fake_llm.script("quiet", Reply.text("four words right here", include_usage=False))

    response = await gateway.complete(LLMRequest(model="quiet", messages=HELLO))

    assert response.input_tokens == litellm.token_counter(model="openai/quiet", messages=HELLO)
    assert response.output_tokens == litellm.token_counter(
        model="openai/quiet", text="four words right here"
    )
    assert response.cost_usd == Decimal("0.000001") * (
        response.input_tokens + response.output_tokens
    )


async def test_the_estimate_counts_prompt_tokens_and_prices_the_dearest_candidate(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [
            fake_deployment(fake_llm, "cheap", input_cost="0.000001", output_cost="0.000002"),
            fake_deployment(fake_llm, "dear", input_cost="0.00001", output_cost="0.00003"),
        ],
        fallbacks={"cheap": ["dear"]},
    )
    messages = [{"role": "user", "content": "Summarise the history of the printing press."}]

    estimate = await gateway.estimate(LLMRequest(model="cheap", messages=messages, max_tokens=200))

    tokens = litellm.token_counter(model="openai/cheap", messages=messages)
    assert estimate.input_tokens == tokens
    assert estimate.max_output_tokens == 200
    assert estimate.cost_usd == Decimal("0.00001") * tokens + Decimal("0.00003") * 200


async def test_the_estimate_of_a_possibly_unpriced_call_has_no_cost(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "mystery-model-7b")])
    estimate = await gateway.estimate(LLMRequest(model="mystery-model-7b", messages=HELLO))
    assert estimate.cost_usd is None
    assert estimate.max_output_tokens == gateway.default_max_tokens


async def test_an_unknown_model_is_refused_before_any_request(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "known")])
    with pytest.raises(UnknownModelError, match="'unknown'; configured models: known, demo"):
        await gateway.complete(LLMRequest(model="unknown", messages=HELLO))
    assert fake_llm.requests == []


def test_failed_attempts_are_chain_data() -> None:
    # The gateway's failure records are the chain's own type: they go into steps unchanged.
    attempt = FailedAttempt(attempt=1, error_class="timeout", message="slow", deployment="a")
    assert FailedAttempt.model_validate_json(attempt.model_dump_json()) == attempt


async def test_deployments_with_rate_limits_still_have_their_usage_tracked(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    limited = fake_deployment(fake_llm, "limited")
    limited["litellm_params"]["rpm"] = 100
    gateway = gateway_for(tmp_path, [limited, fake_deployment(fake_llm, "unlimited")])
    fake_llm.script("limited", Reply.text("a", prompt_tokens=10, completion_tokens=5))

    await gateway.complete(LLMRequest(model="limited", messages=HELLO))

    # The router's own per-minute counters, which its rpm/tpm routing reads.
    backend = gateway._backend.result()
    assert not isinstance(backend, DirectBackend)  # rate limits are the Router's
    router = backend.router
    assert await router.get_model_group_usage("limited") == (15, 1)


@pytest.mark.parametrize("openai_sdk", [True, False])
async def test_openai_models_go_through_the_sdk_only_when_asked(
    fake_llm: FakeLLMServer, tmp_path: Path, openai_sdk: bool
) -> None:
    path = write_model_list(
        tmp_path, [fake_deployment(fake_llm, "m", input_cost="0.000001", output_cost="0.000002")]
    )
    gateway = LLMGateway(load_model_list(path), default_model="m", openai_sdk=openai_sdk)
    fake_llm.script("m", Reply.text("same answer", prompt_tokens=100, completion_tokens=10))

    response = await gateway.complete(LLMRequest(model="m", messages=HELLO))

    # The OpenAI SDK stamps its requests; LiteLLM's own HTTP handler does not.
    assert ("x-stainless-lang" in fake_llm.requests[0].headers) is openai_sdk
    assert response.content == "same answer"
    assert response.cost_usd == Decimal("0.000001") * 100 + Decimal("0.000002") * 10


def test_a_model_takes_images_only_when_every_deployment_that_may_answer_does(
    fake_llm: FakeLLMServer,
    tmp_path: Path,
    gateway_for: GatewayFor,
) -> None:
    gateway = gateway_for(
        tmp_path,
        [
            fake_deployment(fake_llm, "sees", vision=True),
            fake_deployment(fake_llm, "sees-falls-back", vision=True),
            fake_deployment(fake_llm, "blind", vision=False),
            # Not stated in the model list: LiteLLM's model map says (it knows gpt-4o).
            fake_deployment(fake_llm, "mapped", upstream="gpt-4o"),
            fake_deployment(fake_llm, "unknown"),
        ],
        fallbacks={"sees-falls-back": ["blind"]},
    )

    assert gateway.supports_vision("sees") is True
    assert gateway.supports_vision("sees-falls-back") is False
    assert gateway.supports_vision("blind") is False
    assert gateway.supports_vision("mapped") is True
    assert gateway.supports_vision("unknown") is False
