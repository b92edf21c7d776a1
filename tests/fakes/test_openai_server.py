"""The fake LLM server speaks the OpenAI chat-completions protocol, as the real SDK sees it."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
async def client(server: FakeLLMServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=0
    ) as sdk_client:
        yield sdk_client


async def test_text_reply_carries_content_and_usage(
    server: FakeLLMServer, client: openai.AsyncOpenAI
) -> None:
    server.script("m", Reply.text("Hello there.", prompt_tokens=5, completion_tokens=3))

    completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.id == "chatcmpl-1"
    assert completion.model == "m"
    assert completion.choices[0].message.content == "Hello there."
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 3)
    assert completion.usage.total_tokens == 8
    [recorded] = server.requests_for("m")
    assert recorded.body["messages"] == MESSAGES
    assert recorded.headers["authorization"] == "Bearer test"
    server.verify()


async def test_usage_can_be_left_out(server: FakeLLMServer, client: openai.AsyncOpenAI) -> None:
    server.script("m", Reply.text("no usage", include_usage=False))

    completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content == "no usage"
    assert completion.usage is None


async def test_tool_calls_with_dict_and_string_arguments(
    server: FakeLLMServer, client: openai.AsyncOpenAI
) -> None:
    server.script(
        "m",
        Reply.tool_calls(
            [
                ToolCall("get_weather", {"city": "Paris", "days": 2}),
                ToolCall("get_weather", "{not json", id="call_custom"),
            ]
        ),
    )

    completion = await client.chat.completions.create(
        model="m", messages=MESSAGES, tools=[WEATHER_TOOL]
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert [(call.id, call.type) for call in calls] == [
        ("call_1", "function"),
        ("call_custom", "function"),
    ]
    first, second = (call.function for call in calls if call.type == "function")
    assert first.name == "get_weather"
    assert json.loads(first.arguments) == {"city": "Paris", "days": 2}
    assert second.arguments == "{not json"
    assert server.requests[0].body["tools"] == [WEATHER_TOOL]


@pytest.mark.parametrize("include_usage", [True, False])
async def test_streamed_text_reassembles_exactly(
    server: FakeLLMServer, client: openai.AsyncOpenAI, include_usage: bool
) -> None:
    content = "Hello there,  brave new\nworld!"
    server.script("m", Reply.text(content, prompt_tokens=4, completion_tokens=6))

    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True} if include_usage else openai.omit,
    )
    chunks = [chunk async for chunk in stream]

    deltas = [c.choices[0].delta.content for c in chunks if c.choices]
    pieces = [piece for piece in deltas if piece]
    assert "".join(pieces) == content
    assert len(pieces) > 1
    finish_reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish_reasons[-1] == "stop"
    assert finish_reasons[:-1] == [None] * (len(finish_reasons) - 1)
    usage_chunks = [c for c in chunks if not c.choices]
    if include_usage:
        [usage_chunk] = usage_chunks
        assert usage_chunk is chunks[-1]
        assert usage_chunk.usage is not None
        assert usage_chunk.usage.total_tokens == 10
    else:
        assert usage_chunks == []
        assert all(c.usage is None for c in chunks)


async def test_streamed_tool_calls_reassemble_exactly(
    server: FakeLLMServer, client: openai.AsyncOpenAI
) -> None:
    server.script(
        "m",
        Reply.tool_calls(
            [
                ToolCall("get_weather", {"city": "Paris"}),
                ToolCall("search", '{"q": "broken', id="call_x"),
            ]
        ),
    )

    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True
    )
    assembled: dict[int, dict[str, str]] = {}
    argument_pieces: dict[int, int] = {}
    finish_reason = None
    async for chunk in stream:
        choice = chunk.choices[0]
        finish_reason = choice.finish_reason or finish_reason
        for delta in choice.delta.tool_calls or []:
            assert delta.function is not None
            if delta.id is not None:
                assert delta.index not in assembled
                assert delta.function.arguments == ""
                assembled[delta.index] = {"id": delta.id, "name": delta.function.name or ""}
                assembled[delta.index]["arguments"] = ""
            else:
                assert delta.function.name is None
                assembled[delta.index]["arguments"] += delta.function.arguments or ""
                argument_pieces[delta.index] = argument_pieces.get(delta.index, 0) + 1

    assert finish_reason == "tool_calls"
    assert assembled == {
        0: {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        1: {"id": "call_x", "name": "search", "arguments": '{"q": "broken'},
    }
    assert all(count >= 2 for count in argument_pieces.values())


@pytest.mark.parametrize("stream", [False, True])
async def test_scripted_429_is_a_rate_limit_error(
    server: FakeLLMServer, client: openai.AsyncOpenAI, stream: bool
) -> None:
    server.script(
        "m", Reply.error(429, "slow down", error_type="rate_limit", headers={"retry-after": "7"})
    )

    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body == {"message": "slow down", "type": "rate_limit", "code": None}
    server.verify()


async def test_delay_triggers_client_timeout_quietly(
    server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server.script("m", Reply.text("too late", delay_s=1.0))

    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=0, timeout=0.2
    ) as impatient:
        with pytest.raises(openai.APITimeoutError):
            await impatient.chat.completions.create(model="m", messages=MESSAGES)
        # Stopping while the server may still be sleeping must not log or raise either.
        await server.stop()

    assert len(server.requests_for("m")) == 1
    assert server.pending() == {}
    # The service's own loggers are left out: a server that another module started for the
    # whole session may log its background work (a lease recovering runs) at any moment.
    assert [r for r in caplog.records if not r.name.startswith("app.")] == []


async def test_unscripted_call_is_a_500_and_fails_verify(
    server: FakeLLMServer, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="nobody", messages=MESSAGES)

    assert caught.value.status_code == 500
    assert "unscripted call to the fake LLM server: model=nobody" in caught.value.message
    assert len(server.unexpected) == 1
    assert "model=nobody" in server.unexpected[0]
    with pytest.raises(AssertionError, match="unscripted call"):
        server.verify()


async def test_unconsumed_replies_fail_verify(
    server: FakeLLMServer, client: openai.AsyncOpenAI
) -> None:
    server.script("m", Reply.text("one"), Reply.text("two"))

    completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content == "one"
    assert server.pending() == {"m": 1}
    with pytest.raises(AssertionError, match="model=m"):
        server.verify()


async def test_always_answers_every_call(server: FakeLLMServer, client: openai.AsyncOpenAI) -> None:
    server.always("bench", Reply.text("ok"))

    contents = [
        (await client.chat.completions.create(model="bench", messages=MESSAGES))
        .choices[0]
        .message.content
        for _ in range(3)
    ]

    assert contents == ["ok", "ok", "ok"]
    assert len(server.requests_for("bench")) == 3
    assert server.pending() == {}
    server.verify()


async def test_unversioned_path_answers_and_unknown_paths_are_unexpected(
    server: FakeLLMServer,
) -> None:
    server.script("m", Reply.text("plain"))
    root = server.base_url.removesuffix("/v1")

    async with httpx.AsyncClient(base_url=root) as http:
        answered = await http.post("/chat/completions", json={"model": "m", "messages": MESSAGES})
        unknown = await http.get("/v1/models")

    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"] == "plain"
    assert unknown.status_code == 404
    assert server.unexpected == ["GET /v1/models"]


async def test_standalone_mode_serves_until_sigterm() -> None:
    script = Path(__file__).with_name("openai_server.py")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        "--port",
        "0",
        "--model",
        "bench",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        ready = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        match = re.fullmatch(r"READY (http://127\.0\.0\.1:\d+/v1)\n", ready)
        assert match is not None, ready

        async with openai.AsyncOpenAI(
            base_url=match.group(1), api_key="test", max_retries=0
        ) as sdk_client:
            completion = await sdk_client.chat.completions.create(model="bench", messages=MESSAGES)
        assert completion.choices[0].message.content == "ok"

        process.send_signal(signal.SIGTERM)
        rest_of_stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()

    assert process.returncode == 0, stderr.decode()
    assert rest_of_stdout == b""
    assert stderr == b""
