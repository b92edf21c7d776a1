"""The offline demo model as an in-process LiteLLM provider (`omniforge_demo/demo`).

No key, no network; token usage is counted with LiteLLM's tokenizer, so its calls look like a
real provider's to the rest of the system (usage, cost 0, deployment).
"""

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from app.llm.config import DEMO_PROVIDER
from app.llm.demo_brain import DemoReply, respond
from app.llm.litellm_env import CustomLLM, ModelResponse, Usage, litellm


class DemoLLM(CustomLLM):  # type: ignore[misc]  # LiteLLM is untyped
    """LiteLLM custom handler wrapping `demo_brain.respond`."""

    def completion(
        self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> Any:
        return _fill(kwargs["model_response"], model, messages, kwargs["optional_params"])

    async def acompletion(
        self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> Any:
        return _fill(kwargs["model_response"], model, messages, kwargs["optional_params"])

    def streaming(
        self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        yield from _chunks(messages, kwargs["optional_params"])

    async def astreaming(
        self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        for chunk in _chunks(messages, kwargs["optional_params"]):
            yield chunk


def register_demo_provider() -> None:
    """Makes `omniforge_demo/<name>` callable through LiteLLM (idempotent)."""
    others = [p for p in litellm.custom_provider_map if p.get("provider") != DEMO_PROVIDER]
    litellm.custom_provider_map = [
        *others,
        {"provider": DEMO_PROVIDER, "custom_handler": DemoLLM()},
    ]


def _reply(messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> DemoReply:
    return respond(messages, optional_params.get("tools"), optional_params.get("response_format"))


def _usage(
    messages: list[dict[str, Any]], optional_params: dict[str, Any], reply: DemoReply
) -> Usage:
    prompt = litellm.token_counter(messages=messages, tools=optional_params.get("tools"))
    text = (reply.content or "") + "".join(
        name + json.dumps(arguments) for name, arguments in reply.tool_calls
    )
    completion = litellm.token_counter(text=text) if text else 0
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _tool_calls(reply: DemoReply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_demo_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for index, (name, arguments) in enumerate(reply.tool_calls, start=1)
    ]


def _fill(
    model_response: Any, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]
) -> ModelResponse:
    reply = _reply(messages, optional_params)
    # LiteLLM's cost calculation needs the model set on the response.
    model_response.model = model
    choice = model_response.choices[0]
    choice.message = litellm.Message(
        role="assistant", content=reply.content, tool_calls=_tool_calls(reply) or None
    )
    choice.finish_reason = "tool_calls" if reply.tool_calls else "stop"
    model_response.usage = _usage(messages, optional_params, reply)
    return model_response


def _chunks(
    messages: list[dict[str, Any]], optional_params: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """GenericStreamingChunk dicts: the text word by word, each tool call, then usage."""
    reply = _reply(messages, optional_params)
    words = (reply.content or "").split(" ")
    for index, word in enumerate(words):
        text = word if index == len(words) - 1 else word + " "
        if text:
            yield {
                "text": text,
                "tool_use": None,
                "is_finished": False,
                "finish_reason": "",
                "usage": None,
                "index": 0,
            }
    for position, call in enumerate(_tool_calls(reply)):
        yield {
            "text": "",
            "tool_use": {**call, "index": position},
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
        }
    usage = _usage(messages, optional_params, reply)
    yield {
        "text": "",
        "tool_use": None,
        "is_finished": True,
        "finish_reason": "tool_calls" if reply.tool_calls else "stop",
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
        "index": 0,
    }
