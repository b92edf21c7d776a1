"""Prompt tokens counted without LiteLLM equal LiteLLM's count, for every model name kind and
every message and tool shape an OpenAI-compatible request carries; what it cannot count it
says so."""

import json
import random
import string
import subprocess
import sys
from typing import Any

import pytest

from app.llm import counting
from app.llm.counting import NotCounted
from app.llm.litellm_env import litellm
from app.llm.model_map import chat_models_in_map, openai_chat_models

MODELS = [
    "openai/fake-model",  # any self-hosted name: cl100k_base
    "fake-model",
    "gpt-4",  # an OpenAI model LiteLLM knows, of cl100k_base
    "gpt-3.5-turbo-0301",  # 4 tokens a message, a name 1 fewer
    "gpt-35-turbo",  # Azure's name
    "openai/gpt-4o",  # prefixed: not a name LiteLLM knows, so cl100k_base
]
# Of another encoding (o200k_base): LiteLLM's to count
OTHER_ENCODINGS = ["gpt-4o", "gpt-4o-mini", "o1", "o3-mini"]

SCHEMA_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Searches the web.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "mode": {"type": "string", "enum": ["fast", "deep"]},
                    "limit": {"type": "integer"},
                    "ratio": {"type": "number", "enum": [0.5, 1]},
                    "exact": {"type": "boolean"},
                    "nothing": {"type": "null"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "filters": {
                        "type": "object",
                        "description": "Narrower.",
                        "properties": {
                            "site": {"type": "string"},
                            "since": {
                                "type": "object",
                                "properties": {"year": {"type": "integer"}},
                            },
                        },
                        "required": ["site"],
                    },
                    "anything": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                },
                "required": ["query"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The time."}},
    {"type": "function", "function": {"name": "bare", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "", "description": "nameless: left out"}},
]


def _text(rng: random.Random, size: int) -> str:
    alphabet = string.ascii_letters + string.digits + " \n\t.,;:!?-_()[]{}\"'" + "äöü数字🚀"
    return "".join(rng.choice(alphabet) for _ in range(size))


def _conversations() -> list[list[dict[str, Any]]]:
    rng = random.Random(7)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "search", "arguments": json.dumps({"query": "ö" * 3})},
    }
    return [
        [{"role": "user", "content": "Hello"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "x", "name": "alice"}],
        [
            {"role": "user", "content": "Look it up."},
            {"role": "assistant", "content": None, "tool_calls": [call, call]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
            {"role": "system", "content": "late system message"},
        ],
        [{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}],
        [{"role": "user", "content": [{"type": "text", "text": "part one"}, "part two"]}],
        [{"role": "user", "content": ""}, {"role": "assistant", "content": "<|endoftext|> ok"}],
        [{"role": "user", "content": "." * 5000}],  # one run of a character, in pieces
        [{"role": "user", "content": _text(rng, 3000)}],
        [{"role": "user", "content": _text(rng, 1024)}, {"role": "user", "content": "a"}],
    ]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("tools", [None, SCHEMA_TOOLS, SCHEMA_TOOLS[:1]])
def test_the_count_equals_litellms(model: str, tools: list[dict[str, Any]] | None) -> None:
    for messages in _conversations():
        expected = litellm.token_counter(model=model, messages=messages, tools=tools)
        ours = counting.REPLY_PRIMING + sum(counting.count_message(model, m) for m in messages)
        if tools:
            ours += counting.count_tool_definitions(model, tools)
            ours += counting.tools_discount(messages)
        assert ours == expected, messages


@pytest.mark.parametrize("model", OTHER_ENCODINGS)
def test_models_of_another_encoding_are_left_to_litellm(model: str) -> None:
    with pytest.raises(NotCounted):
        counting.count_message(model, {"role": "user", "content": "Hello"})
    with pytest.raises(NotCounted):
        counting.count_tool_definitions(model, SCHEMA_TOOLS)


def test_it_knows_openais_chat_models_as_litellm_does_from_litellms_map() -> None:
    assert chat_models_in_map() == litellm.open_ai_chat_completion_models
    assert openai_chat_models() == litellm.open_ai_chat_completion_models


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]},
        {"role": "user", "content": [{"text": "no type"}]},
        {"role": "assistant", "tool_calls": "not a list"},
        {"role": "assistant", "tool_calls": [{"id": "c1"}]},
        {"role": "user", "search_results": [{"content": "x"}]},
    ],
)
def test_what_it_does_not_count_it_leaves_to_litellm(message: dict[str, Any]) -> None:
    with pytest.raises(NotCounted):
        counting.count_message("openai/gpt-4o", message)


@pytest.mark.parametrize(
    "tools",
    [
        [{"name": "anthropic_style", "input_schema": {"type": "object"}}],
        [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {"type": "object", "properties": {"xs": {"type": "array"}}},
                },
            }
        ],
    ],
)
def test_tools_it_cannot_render_it_leaves_to_litellm(tools: list[dict[str, Any]]) -> None:
    with pytest.raises(NotCounted):
        counting.count_tool_definitions("openai/gpt-4o", tools)


# Runs in a fresh interpreter, where LiteLLM is not imported: the tokenizer counting loads for
# itself, against tiktoken's encoding of the same texts.
_LEAN_PROBE = """
import json
import sys

from app.llm import counting

texts = json.loads(sys.stdin.read())
ours = [counting.count_text("openai/self-hosted", text) for text in texts]
assert "litellm" not in sys.modules
import tiktoken

encoding = tiktoken.get_encoding("cl100k_base")
theirs = [  # in LiteLLM's pieces of 1,024 characters
    sum(len(encoding.encode_ordinary(text[at : at + 1024])) for at in range(0, len(text), 1024))
    for text in texts
]
print(json.dumps([ours, theirs]))
"""


def test_without_litellm_the_tokenizer_counts_as_tiktokens_encoding() -> None:
    rng = random.Random(11)
    texts = [
        "hello world",
        "<|endoftext|> is text here",
        "lone surrogate \ud800 replaced",
        "数字 🚀 äöü",
        _text(rng, 5000),
        "",
    ]
    probe = subprocess.run(
        [sys.executable, "-c", _LEAN_PROBE],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ours, theirs = json.loads(probe.stdout.splitlines()[-1])
    assert ours == theirs
    assert all(count > 0 for count in ours[:-1])
