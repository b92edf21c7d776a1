"""A scripted OpenAI-compatible chat-completions server for tests and benchmarks.

Tests start a `FakeLLMServer` on 127.0.0.1 (a real HTTP server on a free port), script the
replies each model name should give, point LiteLLM (`model="openai/<name>"`,
`api_base=server.base_url`) or the OpenAI SDK at it, and call `verify()` at the end: any call
nobody scripted, or any scripted reply nobody asked for, fails the test.

Standalone, for benchmarks (answers every call for the given models with "ok"):

    python tests/fakes/openai_server.py --port 0 --model NAME [--model NAME2 ...] [--delay-s S]
        [--words N | --reply TEXT] [--tool-call TOOL [--tool-arguments JSON]]

prints one line `READY <base_url>` once listening and serves until SIGTERM or SIGINT; each
answer ("ok", or `--words` words "ok ok2 ok3...", one per chunk when streamed, or `--reply`'s
text) comes
`--delay-s` seconds after its request arrived (default 0). With `--tool-call` a request whose
messages carry no tool result is answered with a call of that tool instead (arguments
`--tool-arguments`, default {"expression": "6*7"} for `calculator`), so each task makes two
LLM calls with a tool call between them. On SIGUSR1 it prints
`STATS calls=<n> in_flight=<n> peak=<n>` (peak calls in flight since the last STATS line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web

# A fixed timestamp keeps every response byte-for-byte reproducible.
_CREATED = 1_700_000_000
# How long stop() lets a still-running handler (say, one sleeping a scripted delay for a client
# that is still connected) finish before cancelling it; tests should not wait for it.
_SHUTDOWN_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class ToolCall:
    """One function call in a scripted reply.

    Dict `arguments` are sent JSON-encoded; a str is sent verbatim, so tests can send invalid
    JSON. Without an `id` the server assigns `call_<n>`, numbered in request order from 1.
    """

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat-completions call; build it with text(), tool_calls() or
    error().

    The server sleeps `delay_s` before answering, and waits for `gate` to be set if given (a
    test then decides when the answer comes). Success replies report the given token counts
    as `usage` unless `include_usage` is false (the field is then left out entirely, and a
    stream sends no usage chunk even when the client asks for one). `reasoning` is sent as the
    message's `reasoning_content`, streamed in pieces before the content, as reasoning models'
    providers send it. A streamed reply with `pause` = (word, event) stops after the chunk
    whose content holds `word` until the event is set: the text so far has reached the client,
    the rest has not.
    """

    content: str | None = None
    reasoning: str | None = None
    gate: asyncio.Event | None = None
    calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    include_usage: bool = True
    delay_s: float = 0.0
    status: int = 200
    error_message: str = ""
    error_type: str = "server_error"
    headers: tuple[tuple[str, str], ...] = ()
    pause: tuple[str, asyncio.Event] | None = None
    # Streamed only: after the text, an error inside the open stream, as vLLM and SGLang send
    # one (`data: {"error": {"message", "code"}}`), and nothing more.
    stream_error: tuple[int, str] | None = None

    @classmethod
    def text(
        cls,
        content: str,
        *,
        prompt_tokens: int = 11,
        completion_tokens: int = 7,
        include_usage: bool = True,
        delay_s: float = 0.0,
        finish_reason: str = "stop",
        reasoning: str | None = None,
        gate: asyncio.Event | None = None,
        pause: tuple[str, asyncio.Event] | None = None,
        stream_error: tuple[int, str] | None = None,
    ) -> Reply:
        return cls(
            content=content,
            reasoning=reasoning,
            gate=gate,
            pause=pause,
            stream_error=stream_error,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            include_usage=include_usage,
            delay_s=delay_s,
        )

    @classmethod
    def tool_calls(
        cls,
        calls: list[ToolCall],
        *,
        content: str | None = None,
        prompt_tokens: int = 11,
        completion_tokens: int = 7,
        include_usage: bool = True,
        delay_s: float = 0.0,
        gate: asyncio.Event | None = None,
    ) -> Reply:
        if not calls:
            raise ValueError("a tool-call reply needs at least one ToolCall")
        return cls(
            content=content,
            gate=gate,
            calls=tuple(calls),
            finish_reason="tool_calls",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            include_usage=include_usage,
            delay_s=delay_s,
        )

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "scripted error",
        *,
        error_type: str = "server_error",
        headers: dict[str, str] | None = None,
        delay_s: float = 0.0,
    ) -> Reply:
        if status < 400:
            raise ValueError(f"an error reply needs a 4xx or 5xx status, not {status}")
        return cls(
            status=status,
            error_message=message,
            error_type=error_type,
            headers=tuple((headers or {}).items()),
            delay_s=delay_s,
        )


@dataclass
class RecordedRequest:
    """A chat-completions request as received: header names are lower-cased."""

    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float  # time.monotonic()


class FakeLLMServer:
    """OpenAI-compatible `POST /v1/chat/completions` (also `/chat/completions`) on real HTTP.

    Each request's `model` field picks the reply: the next one queued by script() for that
    model (FIFO), else the one set by always(). With neither, the call is recorded in
    `unexpected` and answered with HTTP 500; so is a request to any other path (answered 404) or
    with a body that is not a JSON object (400). `requests` keeps every chat-completions request
    in arrival order, unless `record_requests` is false (long benchmarks would grow it unbounded).
    Response and tool-call ids are numbered in arrival order, so runs are deterministic.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, record_requests: bool = True
    ) -> None:
        self.base_url = ""
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[str] = []
        self._host = host
        self._port = port
        self._record_requests = record_requests
        self._completion_count = 0
        self._scripts: dict[str, deque[Reply]] = {}
        self._matching: dict[str, list[tuple[tuple[str, ...], deque[Reply]]]] = {}
        self._always: dict[str, Reply] = {}
        self._tool_call_count = 0
        self._runner: web.AppRunner | None = None
        self._arrivals = asyncio.Condition()

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the fake LLM server is already running")
        app = web.Application()
        for path in ("/v1/chat/completions", "/chat/completions"):
            app.router.add_post(path, self._chat_completions)
        app.router.add_route("*", "/{tail:.*}", self._unknown_route)
        # Cancelling the handler when its client disconnects lets a scripted delay end quietly;
        # access logging is off because it costs CPU in benchmarks.
        runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def script(self, model: str, *replies: Reply) -> None:
        self._scripts.setdefault(model, deque()).extend(replies)

    def script_matching(self, model: str, needles: tuple[str, ...], *replies: Reply) -> None:
        """Replies, in order, for the requests of `model` whose messages' text holds every one
        of `needles`: for calls a client makes concurrently, which arrive in any order. They
        are tried before the plain script, the first registered first."""
        self._matching.setdefault(model, []).append((needles, deque(replies)))

    def always(self, model: str, reply: Reply) -> None:
        self._always[model] = reply

    async def wait_for_requests(self, count: int, model: str | None = None) -> None:
        """Returns once `count` requests (for `model`, if given) have arrived; wakes on arrival,
        so a test can act while the server is still answering (say, during a `delay_s`)."""

        def arrived() -> bool:
            matching = self.requests if model is None else self.requests_for(model)
            return len(matching) >= count

        async with self._arrivals:
            await self._arrivals.wait_for(arrived)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.model == model]

    def reset(self) -> None:
        """Forgets scripts, standing replies and recorded requests (between tests sharing
        one server); numbering goes on."""
        self._scripts.clear()
        self._matching.clear()
        self._always.clear()
        self.requests.clear()
        self.unexpected.clear()

    def pending(self) -> dict[str, int]:
        pending = {model: len(queue) for model, queue in self._scripts.items() if queue}
        for model, matchers in self._matching.items():
            left = sum(len(queue) for _, queue in matchers)
            if left:
                pending[model] = pending.get(model, 0) + left
        return pending

    def verify(self) -> None:
        problems = [f"unscripted call: {call}" for call in self.unexpected]
        problems += [
            f"{count} scripted reply(s) never requested for model={model}"
            for model, count in self.pending().items()
        ]
        if problems:
            raise AssertionError("fake LLM server: " + "; ".join(problems))

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.unexpected.append(f"{request.method} {request.path} with a non-object JSON body")
            return _error_response(400, "the request body must be a JSON object", "invalid_request")
        model = str(body.get("model", ""))
        self._completion_count += 1
        if self._record_requests:
            self.requests.append(
                RecordedRequest(
                    model=model,
                    body=body,
                    headers={name.lower(): value for name, value in request.headers.items()},
                    received_at=time.monotonic(),
                )
            )
            async with self._arrivals:
                self._arrivals.notify_all()
        reply = self._reply_for(model, body)
        if reply is None:
            self.unexpected.append(f"{request.method} {request.path} model={model}")
            message = f"unscripted call to the fake LLM server: model={model}"
            return _error_response(500, message, "server_error")
        # Ids are taken on arrival, so they follow request order even when delays differ.
        completion_id = f"chatcmpl-{self._completion_count}"
        calls = [self._render_call(call) for call in reply.calls]
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        if reply.gate is not None:
            await reply.gate.wait()
        if reply.status >= 400:
            return _error_response(
                reply.status, reply.error_message, reply.error_type, dict(reply.headers)
            )
        if body.get("stream"):
            stream_options = body.get("stream_options") or {}
            want_usage = bool(stream_options.get("include_usage")) and reply.include_usage
            chunks = _stream_chunks(reply, model, completion_id, calls, want_usage)
            return await _send_stream(request, chunks, reply.pause)
        return web.json_response(_completion(reply, model, completion_id, calls))

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        """The next reply scripted for requests like this one, else the next scripted for
        `model`, else its standing one."""
        matchers = self._matching.get(model)
        if matchers:
            text = _messages_text(body.get("messages"))
            for needles, replies in matchers:
                if replies and all(needle in text for needle in needles):
                    return replies.popleft()
        queue = self._scripts.get(model)
        return queue.popleft() if queue else self._always.get(model)

    async def _unknown_route(self, request: web.Request) -> web.StreamResponse:
        self.unexpected.append(f"{request.method} {request.path}")
        return _error_response(
            404, f"no such route on the fake LLM server: {request.path}", "invalid_request"
        )

    def _render_call(self, call: ToolCall) -> dict[str, Any]:
        call_id = call.id
        if call_id is None:
            self._tool_call_count += 1
            call_id = f"call_{self._tool_call_count}"
        arguments = (
            call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        )
        function = {"name": call.name, "arguments": arguments}
        return {"id": call_id, "type": "function", "function": function}


def _messages_text(messages: Any) -> str:
    """The text of a request's messages, one after another."""
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return "\n".join(parts)


def _error_response(
    status: int, message: str, error_type: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": error_type, "code": None}}
    return web.json_response(body, status=status, headers=headers)


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.calls else reply.finish_reason


def _envelope(kind: str, completion_id: str, model: str, **fields: Any) -> dict[str, Any]:
    return {"id": completion_id, "object": kind, "created": _CREATED, "model": model, **fields}


def _completion(
    reply: Reply, model: str, completion_id: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if calls:
        message["tool_calls"] = calls
    finish_reason = _finish_reason(reply)
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    body = _envelope("chat.completion", completion_id, model, choices=[choice])
    if reply.include_usage:
        body["usage"] = _usage(reply)
    return body


def _stream_chunks(
    reply: Reply, model: str, completion_id: str, calls: list[dict[str, Any]], want_usage: bool
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _envelope("chat.completion.chunk", completion_id, model, choices=[choice])

    def tool_delta(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    yield chunk({"role": "assistant", "content": None if reply.content is None else ""})
    # Split after each run of whitespace, so the pieces concatenate back to the exact text.
    for word in re.split(r"(?<=\s)(?=\S)", reply.reasoning or ""):
        if word:
            yield chunk({"reasoning_content": word})
    for word in re.split(r"(?<=\s)(?=\S)", reply.content or ""):
        if word:
            yield chunk({"content": word})
    if reply.stream_error is not None:
        code, message = reply.stream_error
        yield {"error": {"message": message, "code": code}}
        return
    for index, call in enumerate(calls):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        opening = {"name": name, "arguments": ""}
        yield tool_delta(index, id=call["id"], type="function", function=opening)
        middle = len(arguments) // 2
        for piece in (arguments[:middle], arguments[middle:]):
            yield tool_delta(index, function={"arguments": piece})
    yield chunk({}, _finish_reason(reply))
    if want_usage:
        yield _envelope(
            "chat.completion.chunk", completion_id, model, choices=[], usage=_usage(reply)
        )


async def _send_stream(
    request: web.Request,
    chunks: Iterator[dict[str, Any]],
    pause: tuple[str, asyncio.Event] | None = None,
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    # A client that hangs up mid-stream has nobody left to tell; aiohttp then drops the response.
    with contextlib.suppress(ConnectionResetError):
        await response.prepare(request)
        for chunk in chunks:
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if pause is not None and pause[0] in _chunk_content(chunk):
                await pause[1].wait()
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    return response


def _chunk_content(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


class _CountingServer(FakeLLMServer):
    """Standalone mode only: counts chat-completions calls, those in flight and their peak;
    with `tool_call`, answers it to every request that carries no tool result yet."""

    def __init__(self, port: int, tool_call: Reply | None = None) -> None:
        super().__init__(port=port, record_requests=False)
        self.calls = 0
        self.in_flight = 0
        self.peak = 0
        self._tool_call = tool_call

    def _reply_for(self, model: str, body: dict[str, Any]) -> Reply | None:
        reply = super()._reply_for(model, body)
        if reply is None or self._tool_call is None:
            return reply
        messages = body.get("messages") or []
        answered = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
        return reply if answered else self._tool_call

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super()._chat_completions(request)
        finally:
            self.in_flight -= 1

    def report(self) -> None:
        print(f"STATS calls={self.calls} in_flight={self.in_flight} peak={self.peak}", flush=True)
        self.peak = self.in_flight


async def _serve(
    port: int,
    models: list[str],
    delay_s: float = 0.0,
    words: int = 1,
    tool: tuple[str, dict[str, Any]] | None = None,
    reply: str | None = None,
) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    tool_call = None
    if tool is not None:
        tool_call = Reply.tool_calls([ToolCall(*tool)], delay_s=delay_s)
    async with _CountingServer(port, tool_call) as server:
        loop.add_signal_handler(signal.SIGUSR1, server.report)
        # Streamed one word per chunk; words differ, as LiteLLM refuses a stream repeating one.
        answer = reply or " ".join(["ok", *(f"ok{n}" for n in range(2, words + 1))])
        for model in models:
            server.always(model, Reply.text(answer, delay_s=delay_s))
        print(f"READY {server.base_url}", flush=True)
        await stopping.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Serve a fake OpenAI chat-completions API that answers 'ok' to every call."
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one")
    parser.add_argument(
        "--model", action="append", required=True, dest="models", help="model name to answer"
    )
    parser.add_argument(
        "--delay-s", type=float, default=0.0, help="seconds each answer waits (default 0)"
    )
    parser.add_argument(
        "--words", type=int, default=1, help="answer this many words: ok ok2 ok3... (default 1)"
    )
    parser.add_argument("--reply", help="answer this text instead (one chunk when streamed)")
    parser.add_argument(
        "--tool-call",
        metavar="TOOL",
        help="answer a request without a tool result by calling TOOL first",
    )
    parser.add_argument(
        "--tool-arguments",
        type=json.loads,
        default={"expression": "6*7"},
        help='JSON arguments of --tool-call (default {"expression": "6*7"})',
    )
    args = parser.parse_args(argv)
    tool = None if args.tool_call is None else (args.tool_call, args.tool_arguments)
    asyncio.run(_serve(args.port, args.models, args.delay_s, args.words, tool, args.reply))


if __name__ == "__main__":
    main()
