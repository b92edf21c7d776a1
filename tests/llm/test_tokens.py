"""Prompt tokens counted message by message, cached, equal LiteLLM's count of the whole prompt."""

import json
from typing import Any

import pytest

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
