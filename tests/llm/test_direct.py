"""Which calls go over HTTP directly, and that they send what LiteLLM would have sent.

The contracts every call keeps (prices, unpriced flagging, fallbacks, error kinds, streaming,
usage counted when a provider reports none) run on both paths in `test_gateway.py`; these are
the direct path's own: what it takes, what it leaves to LiteLLM, what it sends."""

import asyncio
import json
import os
import socket
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from app.llm import LLMCallError, LLMDelta, LLMErrorKind, LLMGateway, LLMRequest, load_model_list
from tests.factories import fake_deployment, gateway_for, write_model_list
from tests.fakes.openai_server import FakeLLMServer, Reply

HELLO = [{"role": "user", "content": "hello"}]


def _took_direct_path(request_headers: dict[str, str]) -> bool:
    return request_headers.get("user-agent") == "OmniForge"


@pytest.mark.parametrize("path", ["direct", "litellm", "openai_sdk"])
async def test_each_setting_sends_calls_its_own_way_with_the_same_answer(
    fake_llm: FakeLLMServer, tmp_path: Path, path: str
) -> None:
    models = write_model_list(
        tmp_path, [fake_deployment(fake_llm, "m", input_cost="0.000001", output_cost="0.000002")]
    )
    gateway = LLMGateway(
        load_model_list(models),
        default_model="m",
        openai_sdk=path == "openai_sdk",
        direct=path != "litellm",
    )
    fake_llm.script("m", Reply.text("same answer", prompt_tokens=100, completion_tokens=10))

    response = await gateway.complete(LLMRequest(model="m", messages=HELLO))

    headers = fake_llm.requests[0].headers
    # The OpenAI SDK stamps its requests; LiteLLM's own HTTP handler does not; ours say who.
    assert ("x-stainless-lang" in headers) is (path == "openai_sdk")
    assert _took_direct_path(headers) is (path == "direct")
    assert gateway.direct_models() == (["m"] if path == "direct" else [])
    assert response.content == "same answer"
    assert response.cost_usd == Decimal("0.000001") * 100 + Decimal("0.000002") * 10
    await gateway.aclose()


def test_deployments_litellm_would_rewrite_or_route_stay_with_litellm(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    def entry(name: str, **params: Any) -> dict[str, Any]:
        deployment = fake_deployment(fake_llm, name)
        deployment["litellm_params"].update(params)
        return deployment

    balanced = [entry("balanced"), entry("balanced")]
    on_openai = entry("on-openai", api_base="https://api.openai.com/v1")
    reasoning = entry("reasoning", model="openai/o3-mini")
    versioned = entry("versioned", api_version="2024-06-01")
    limited = entry("limited", rpm=10)
    gateway = gateway_for(
        tmp_path,
        [entry("plain"), *balanced, on_openai, reasoning, versioned, limited],
    )
    gateway.load()
    assert gateway.direct_models() == ["plain"]

    # Router settings a direct call does not honour leave every model to the Router.
    path = write_model_list(tmp_path, [entry("plain")])
    path.write_text(path.read_text() + "router_settings:\n  num_retries: 2\n")
    retried = LLMGateway(load_model_list(path))
    retried.load()
    assert retried.direct_models() == []


async def test_a_request_with_parts_litellm_rewrites_goes_through_litellm(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "m")])
    fake_llm.always("m", Reply.text("ok"))
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    pdf = {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}}
    asks = [
        [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}],
        [{"role": "user", "content": [{"type": "text", "text": "read this"}, pdf]}],
    ]

    for messages in asks:
        await gateway.complete(LLMRequest(model="m", messages=messages))

    image_call, pdf_call = fake_llm.requests
    assert _took_direct_path(image_call.headers)
    assert image_call.body["messages"] == asks[0]
    assert not _took_direct_path(pdf_call.headers)
    # LiteLLM names a file sent without one.
    assert pdf_call.body["messages"][0]["content"][1]["file"]["filename"] == "my_file.pdf"


async def test_both_paths_send_the_same_body(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    deployment = fake_deployment(fake_llm, "m", native_tools=True)
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Looks a word up.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        # An ECMAScript class Python's `re` cannot compile: OpenAI-compatible
                        # servers validate with Python, so LiteLLM drops it, and so do we.
                        "word": {"type": "string", "pattern": "^\\p{L}+$"},
                        "lang": {"type": "string", "pattern": "^[a-z]{2}$"},
                    },
                    "required": ["word"],
                },
            },
        }
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Define ‘hygge’."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"word": "hygge"}'},
                }
            ],
        },
        # A lone surrogate (a broken tool output) goes as JSON escapes, as LiteLLM sends it.
        {"role": "tool", "tool_call_id": "c1", "content": "cosiness \ud800"},
    ]
    request = LLMRequest(
        model="m",
        messages=messages,
        tools=tools,
        tool_choice="auto",
        temperature=0.2,
        max_tokens=64,
        stop=["END"],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": {}}},
    )
    fake_llm.always("m", Reply.text("{}"))
    bodies = []
    for direct in (True, False):
        gateway = gateway_for(tmp_path, [deployment], direct=direct)
        await gateway.complete(request)
        events = [e async for e in gateway.stream(request)]
        assert not isinstance(events[-1], LLMDelta)
        bodies.append([r.body for r in fake_llm.requests])
        assert [_took_direct_path(r.headers) for r in fake_llm.requests] == [direct, direct]
        fake_llm.requests.clear()

    for ours, theirs in zip(*bodies, strict=True):
        assert sorted(ours.items()) == sorted(theirs.items())
    sent = bodies[0][0]["tools"][0]["function"]["parameters"]["properties"]
    assert sent == {"word": {"type": "string"}, "lang": {"type": "string", "pattern": "^[a-z]{2}$"}}
    assert tools[0]["function"]["parameters"]["properties"]["word"]["pattern"] == "^\\p{L}+$"


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
async def test_an_error_inside_an_open_stream_is_raised_classified(
    fake_llm: FakeLLMServer, tmp_path: Path, direct: bool
) -> None:
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "m")], direct=direct)
    fake_llm.script("m", Reply.text("half an ", stream_error=(503, "engine overloaded")))

    deltas: list[str] = []

    async def read() -> None:
        async for event in gateway.stream(LLMRequest(model="m", messages=HELLO)):
            assert isinstance(event, LLMDelta)
            deltas.append(event.text)

    with pytest.raises(LLMCallError) as raised:
        await read()

    assert "".join(deltas) == "half an "
    assert raised.value.kind is LLMErrorKind.TRANSIENT
    assert raised.value.status_code == 503
    assert "engine overloaded" in raised.value.message


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
async def test_a_deployment_nobody_answers_at_falls_back_as_a_transient_failure(
    fake_llm: FakeLLMServer, tmp_path: Path, direct: bool
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    down = fake_deployment(fake_llm, "down", deployment_id="down-1")
    down["litellm_params"]["api_base"] = f"http://127.0.0.1:{port}/v1"
    gateway = gateway_for(
        tmp_path,
        [down, fake_deployment(fake_llm, "up")],
        fallbacks={"down": ["up"]},
        direct=direct,
    )
    fake_llm.script("up", Reply.text("from up"))

    response = await gateway.complete(LLMRequest(model="down", messages=HELLO))

    assert response.content == "from up"
    [attempt] = response.failed_attempts
    assert (attempt.deployment, attempt.error_class) == ("down-1", "transient")
    if direct:  # LiteLLM's message names the address; ours does not
        assert f"127.0.0.1:{port}" not in attempt.message


async def test_a_gateway_serves_one_event_loop_after_another(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """A command may run several loops in turn: each gets a connection pool of its own, and
    the one of an ended loop is closed without it (no warning of an unclosed session)."""
    gateway = gateway_for(tmp_path, [fake_deployment(fake_llm, "m")])
    await gateway.loaded()

    async def ask() -> str | None:
        return (await gateway.complete(LLMRequest(model="m", messages=HELLO))).content

    answers = []
    for word in ("one", "two"):
        fake_llm.script("m", Reply.text(word))
        # Each in a loop of its own, in a thread, while this loop serves the fake model.
        answers.append(await asyncio.to_thread(asyncio.run, ask()))
    assert answers == ["one", "two"]
    assert all(_took_direct_path(r.headers) for r in fake_llm.requests)


@pytest.mark.parametrize(
    ("body", "stream"),
    [
        (b'{"choices": "none"}', False),
        (b'{"choices": [{"message": {"content": 42}}]}', False),
        (b"<html>gateway</html>", False),
        (b'data: {"choices": [{"delta": {"content": ["a"]}}]}\n\n', True),
        (b"data: {not json\n\n", True),
        (b'data: {"choices": [{"delta": {"tool_calls": [{"index": "a"}]}}]}\n\n', True),
    ],
    ids=[
        "choices-not-a-list",
        "content-not-text",
        "not-json",
        "chunk-content-not-text",
        "bad-chunk",
        "call-index-not-a-number",
    ],
)
async def test_an_answer_that_is_not_a_chat_completion_fails_the_call_cleanly(
    tmp_path: Path, body: bytes, stream: bool
) -> None:
    async def answer(request: web.Request) -> web.Response:
        kind = "text/event-stream" if stream else "application/json"
        return web.Response(body=body, content_type=kind)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    deployment = {
        "model_name": "odd",
        "litellm_params": {"model": "openai/odd", "api_base": f"http://127.0.0.1:{port}/v1"},
    }
    gateway = gateway_for(tmp_path, [deployment])
    request = LLMRequest(model="odd", messages=HELLO)

    async def call() -> object:
        if stream:
            return [event async for event in gateway.stream(request)]
        return await gateway.complete(request)

    try:
        with pytest.raises(LLMCallError) as raised:
            await call()
    finally:
        await gateway.aclose()
        await runner.cleanup()

    assert raised.value.kind is LLMErrorKind.TRANSIENT
    assert raised.value.message.startswith("APIError: odd sent ")
    assert gateway.direct_models() == ["odd"]


_FOREIGN_REGEX_PROBE = r"""
import asyncio, json, sys, threading
from pathlib import Path
from app.llm import LLMGateway, LLMRequest, load_model_list

imported_in = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "litellm":
            imported_in.append(threading.current_thread().name)
        return None


sys.meta_path.insert(0, Watch())
tool = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "pattern": "^\\p{L}+$"}},
        },
    },
}


async def main():
    gateway = LLMGateway(load_model_list(Path(sys.argv[1])), default_model="m", direct=True)
    request = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=[tool])
    response = await gateway.complete(request)
    await gateway.aclose()
    return response.content, threading.current_thread().name


content, loop_thread = asyncio.run(main())
print(json.dumps({"imported_in": imported_in, "loop": loop_thread, "content": content}))
"""


async def test_a_tool_regex_python_cannot_compile_loads_litellm_off_the_event_loop(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """Dropping such a regex takes LiteLLM's code: on a direct deployment that has not loaded
    it, the call waits for its load in a thread rather than importing it on the loop (seconds
    during which every other run of the process would stall)."""
    models = write_model_list(tmp_path, [fake_deployment(fake_llm, "m", native_tools=True)])
    fake_llm.script("m", Reply.text("found"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _FOREIGN_REGEX_PROBE,
        str(models),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    async with asyncio.timeout(120):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    probe = json.loads(out.decode().splitlines()[-1])

    assert probe["content"] == "found"
    assert probe["imported_in"], "LiteLLM was not needed: the probe proves nothing"
    assert probe["loop"] not in probe["imported_in"]
    [sent] = fake_llm.requests
    assert _took_direct_path(sent.headers)
    assert sent.body["tools"][0]["function"]["parameters"]["properties"] == {
        "word": {"type": "string"}
    }
