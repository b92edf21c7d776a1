"""Prompt tokens counted message by message, cached, equal LiteLLM's count of the whole prompt."""

import asyncio
import base64
import io
import json
import random
from typing import Any

import pytest
from PIL import Image

from app.bulkheads import TenantThreads
from app.llm.litellm_env import litellm
from app.llm.tokens import PromptTokens

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluates arithmetic.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer with care. " * 20},
        {"role": "user", "content": "What is 17 * 23 + 4? Explain."},
    ]
    for turn in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {
                            "name": "calculator",
                            "arguments": json.dumps({"expression": f"{turn} + 1"}),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": str(turn + 1)})
        messages.append({"role": "assistant", "content": f"Turn {turn}: ünïcode, 数字, emoji 🚀"})
    return messages


@pytest.mark.parametrize("model", ["openai/fake-model", "gpt-4o", "omniforge_demo/demo"])
@pytest.mark.parametrize("tools", [None, TOOLS])
def test_the_count_equals_litellms_as_the_conversation_grows(
    model: str, tools: list[dict[str, Any]] | None
) -> None:
    counter = PromptTokens()
    for turns in range(6):
        messages = _conversation(turns)
        expected = litellm.token_counter(model=model, messages=messages, tools=tools)
        assert counter.count(model, messages, tools) == expected
        assert counter.count(model, messages, tools) == expected  # from the cache


def test_the_cache_is_bounded() -> None:
    counter = PromptTokens(max_entries=5)
    messages = [{"role": "user", "content": f"message {i}"} for i in range(20)]
    expected = litellm.token_counter(model="gpt-4o", messages=messages)
    assert counter.count("gpt-4o", messages) == expected
    assert len(counter._messages) == 5
    assert counter.count("gpt-4o", messages) == expected


async def test_a_large_new_message_is_counted_off_the_event_loop() -> None:
    """While a long message is tokenized, the loop runs other work; the count is LiteLLM's."""
    counter = PromptTokens()
    large = {"role": "user", "content": "word " * 8_000}  # 40,000 characters
    counting = asyncio.ensure_future(
        counter.count_off_loop("gpt-4o", [large], threads=TenantThreads(), tenant_id="acme")
    )
    seen_while_counting: list[bool] = []

    async def other_work() -> None:
        seen_while_counting.append(counting.done())

    other = asyncio.ensure_future(other_work())
    total = await counting
    await other

    assert seen_while_counting == [False]
    assert total == litellm.token_counter(model="gpt-4o", messages=[large])
    # Counted once: now from the cache, on the loop.
    assert counter.count("gpt-4o", [large]) == total


async def test_small_messages_are_counted_on_the_loop_without_a_thread_hop() -> None:
    counter = PromptTokens()
    small = {"role": "user", "content": "What is 17 * 23 + 4?"}
    counting = asyncio.ensure_future(
        counter.count_off_loop("gpt-4o", [small], threads=TenantThreads(), tenant_id="acme")
    )
    seen: list[bool] = []

    async def other_work() -> None:
        seen.append(counting.done())

    other = asyncio.ensure_future(other_work())
    total = await counting
    await other

    assert seen == [True]
    assert total == litellm.token_counter(model="gpt-4o", messages=[small])


async def test_an_image_is_counted_off_the_loop_and_its_bytes_are_not_kept_as_a_key() -> None:
    noise = Image.frombytes("RGB", (120, 120), random.Random(7).randbytes(120 * 120 * 3))
    png = io.BytesIO()
    noise.save(png, format="PNG")  # noise does not compress: about 43,000 bytes
    data_url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    image = {
        "role": "user",
        "content": [
            {"type": "text", "text": "The image read_file returned:"},
            {"type": "image_url", "image_url": {"url": data_url}},
        ],
    }
    counter = PromptTokens()
    counting = asyncio.ensure_future(
        counter.count_off_loop("gpt-4o", [image], threads=TenantThreads(), tenant_id="acme")
    )
    seen: list[bool] = []

    async def other_work() -> None:
        seen.append(counting.done())

    other = asyncio.ensure_future(other_work())
    total = await counting
    await other

    assert seen == [False]
    assert total == litellm.token_counter(model="gpt-4o", messages=[image])
    [(_, key)] = list(counter._messages)
    assert isinstance(key, bytes)
    assert len(key) == 32
    assert counter.count("gpt-4o", [image]) == total


def test_tools_cost_less_with_a_system_message_wherever_it_is() -> None:
    """The tools' count is cached once per tool set; the system message's discount is the
    prompt's own (LiteLLM gives it for a system message anywhere in the prompt)."""
    counter = PromptTokens()
    user = {"role": "user", "content": "What is 2 + 2?"}
    system = {"role": "system", "content": "Be brief."}
    for messages in ([user], [system, user], [user, system], [user]):
        expected = litellm.token_counter(model="gpt-4o", messages=messages, tools=TOOLS)
        assert counter.count("gpt-4o", messages, TOOLS) == expected, messages
