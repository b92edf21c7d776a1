"""The LLM tool: arguments become gateway requests; failures become classified tool errors."""

from decimal import Decimal
from pathlib import Path

import pytest

from app.chain import ErrorCode
from app.tools.builtin import builtin_tools
from app.tools.builtin.llm import LLMTool
from app.tools.executor import ToolExecutor
from app.tools.models import RetryPolicy
from app.tools.registry import ToolRegistry
from tests.factories import context_for, fake_deployment, gateway_for, new_chain
from tests.fakes.openai_server import FakeLLMServer, Reply


def _executor(fake_llm: FakeLLMServer, tmp_path: Path, **tool_options: object) -> ToolExecutor:
    gateway = gateway_for(
        tmp_path,
        [fake_deployment(fake_llm, "m", input_cost="0.000002", output_cost="0.000008")],
        default_model="m",
    )
    registry = ToolRegistry(builtin_tools())
    registry.register(LLMTool(gateway, registry, **tool_options))  # type: ignore[arg-type]
    return ToolExecutor(registry)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"prompt": "hi", "model": "gpt-9"}, "model: unknown model 'gpt-9' (configured: m, demo)"),
        ({"model": "m"}, "prompt: either `prompt` or `messages` is required"),
        ({"prompt": "hi", "tools": ["nope"]}, "tools: 'nope' is not a tool the model can call"),
        ({"prompt": "hi", "tools": ["llm"]}, "tools: 'llm' is not a tool the model can call"),
        ({"prompt": "hi", "temperature": 3}, "temperature: 3 is greater than the maximum of 2"),
    ],
)
async def test_bad_arguments_fail_without_calling_the_model(
    fake_llm: FakeLLMServer, tmp_path: Path, arguments: dict[str, object], message: str
) -> None:
    chain = new_chain()
    result = await _executor(fake_llm, tmp_path).execute(
        chain, context_for(chain), "llm", arguments
    )
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert message in (result.error or "")
    assert fake_llm.requests == []


async def test_a_prompt_with_a_system_message_and_tool_names_becomes_the_request(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script("m", Reply.text("ok", prompt_tokens=100, completion_tokens=10))
    chain = new_chain()
    result = await _executor(fake_llm, tmp_path).execute(
        chain,
        context_for(chain),
        "llm",
        {"prompt": "hi", "system": "be brief", "tools": ["calculator"], "max_tokens": 64},
    )
    body = fake_llm.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["calculator"]
    assert body["max_tokens"] == 64
    assert result.value == {"content": "ok", "tool_calls": [], "finish_reason": "stop"}
    assert result.info.cost_usd == Decimal("0.000002") * 100 + Decimal("0.000008") * 10
    assert result.result_step.visibility.summary == ("m (m#1): 100 in / 10 out tokens, $0.00028")


async def test_its_estimate_prices_the_prompt_and_the_output_cap(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    executor = _executor(fake_llm, tmp_path)
    chain = new_chain()
    tool = executor.registry.get("llm")
    estimate = await tool.estimate({"prompt": "hello there", "max_tokens": 100}, context_for(chain))
    assert estimate is not None
    assert estimate.max_output_tokens == 100
    assert estimate.cost_usd == (
        Decimal("0.000002") * estimate.input_tokens + Decimal("0.000008") * 100
    )


async def test_provider_errors_are_retried_only_when_retryable(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fast = RetryPolicy(max_attempts=3, initial_backoff_s=0.001, jitter=0)
    executor = _executor(fake_llm, tmp_path, retry=fast)
    fake_llm.script("m", Reply.error(500, "boom"), Reply.text("ok"), Reply.error(401, "bad key"))
    chain = new_chain()

    retried = await executor.execute(chain, context_for(chain), "llm", {"prompt": "a"})
    refused = await executor.execute(chain, context_for(chain), "llm", {"prompt": "b"})

    assert retried.success
    assert retried.info.attempts == 2
    assert not refused.success
    assert refused.info.attempts == 1
    assert refused.error_code is ErrorCode.LLM_ERROR
    assert refused.info.failed_attempts[0].error_class == "authentication"
