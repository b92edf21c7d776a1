"""OpenAI-compatible deployments called over HTTP directly: LiteLLM's per-call work, without
LiteLLM's call path.

A deployment that LiteLLM would only relay is called here: `openai/<model>` at an `api_base`
that is not OpenAI's own, for a model whose parameters LiteLLM sends unchanged (not one of
OpenAI's reasoning models, which it rewrites), the only deployment of its model, with no
per-minute limits and only the parameters below. The request body is the one LiteLLM sends
such a deployment (its schema clean-up of tool regexes included); the answer is parsed once;
errors are classified as `classify` classifies LiteLLM's, with the same kinds, statuses and
`retry-after`; a call falls back across models as the Router does (any failure moves on to
the next model, each failure recorded). A request LiteLLM would transform (message parts
other than text and image URLs, tool messages with parts) goes through LiteLLM, and so does
everything else: other providers, load-balanced groups, rate limits, router retries,
context-window fallbacks. Prices stay LiteLLM's (`Deployment.cost`).

One difference, deliberate: a failed call does not take its model out of service. LiteLLM's
Router cools down even the only deployment of a model after a 401, 404 or timeout, and
refuses every tenant's calls to it for seconds; here each call is tried, and the executor's
retry policy backs off.
"""

import asyncio
import json
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlparse

import aiohttp

from app.chain import FailedAttempt
from app.llm.config import ENV_REFERENCE_PREFIX, ModelList
from app.llm.errors import LLMCallError, LLMErrorKind, kind_of_status
from app.llm.types import LLMDelta, LLMRequest, LLMToolCall, StreamedReply
from app.llm.wire import tools_json

# The deployment parameters a direct call honours; any other (api_version, tpm, a default
# temperature…) leaves the deployment to LiteLLM.
_PARAMETERS = frozenset(
    {"model", "api_base", "api_key", "timeout", "stream_timeout", "max_retries", "organization"}
)
# Router settings that change nothing for a model with one deployment called without retries.
_ROUTER_SETTINGS = frozenset({"fallbacks", "routing_strategy", "allowed_fails", "cooldown_time"})
_MAX_MESSAGE_CHARS = 300
_STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
}
# How OpenAI-compatible servers say a prompt is too long (as LiteLLM recognises it).
_CONTEXT_WINDOW_SIGNS = (
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "context window",
    "prompt is too long",
)
_T = TypeVar("_T")
# What reading an answer that is not the chat completion it should be raises.
_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError)
_CONTENT_POLICY_SIGNS = ("content_policy_violation", "content_filter", "content management policy")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The one deployment of a model, as a direct call reaches it."""

    deployment_id: str
    model_name: str
    url: str
    upstream_model: str
    headers: dict[str, str]
    timeout_s: float
    stream_timeout_s: float


@dataclass(slots=True)
class Answer:
    """A deployment's answer, parsed; its finish reason and usage as the provider said them
    (`usage` None when it reported none): the backend reads them as LiteLLM would."""

    endpoint: Endpoint
    content: str | None
    reasoning: str | None
    tool_calls: list[LLMToolCall]
    finish_reason: str | None
    usage: dict[str, Any] | None


def direct_endpoints(
    model_list: ModelList,
    ids: Iterable[str],
    *,
    request_timeout_s: float,
    unchanged: Callable[[str], bool],
) -> dict[str, Endpoint]:
    """The models (by name) whose calls can go direct: none when the router settings ask for
    something a direct call does not do. `unchanged` says whether LiteLLM's OpenAI
    configuration passes a model's parameters through as they are."""
    if not set(model_list.router_settings) <= _ROUTER_SETTINGS:
        return {}
    if "*" in model_list.fallbacks():
        return {}
    configs = list(zip(ids, model_list.model_list, strict=True))
    per_model: dict[str, int] = {}
    for _, config in configs:
        per_model[config.model_name] = per_model.get(config.model_name, 0) + 1
    endpoints: dict[str, Endpoint] = {}
    for deployment_id, config in configs:
        params = config.litellm_params
        if per_model[config.model_name] != 1 or config.model_extra:
            continue  # load-balanced, or with per-minute limits beside it: the Router's
        if not set(params) <= _PARAMETERS or not _relayed_unchanged(params, unchanged):
            continue
        headers = {"Content-Type": "application/json", "User-Agent": "OmniForge"}
        # Without a key of its own, LiteLLM sends the environment's OpenAI key.
        api_key = _resolved(params.get("api_key")) or os.environ.get("OPENAI_API_KEY")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if (organization := _resolved(params.get("organization"))) is not None:
            headers["OpenAI-Organization"] = organization
        timeout = float(params.get("timeout") or request_timeout_s)
        endpoints[config.model_name] = Endpoint(
            deployment_id=deployment_id,
            model_name=config.model_name,
            url=_url(str(params["api_base"])),
            upstream_model=str(params["model"]).removeprefix("openai/"),
            headers=headers,
            timeout_s=timeout,
            stream_timeout_s=float(params.get("stream_timeout") or timeout),
        )
    return endpoints


def _relayed_unchanged(params: dict[str, Any], unchanged: Callable[[str], bool]) -> bool:
    """An `openai/` model at a compatible server's `api_base` whose parameters LiteLLM's
    OpenAI configuration passes through as they are (a model it knows as a plain chat model,
    or one it does not know)."""
    model, api_base = str(params["model"]), params.get("api_base")
    if not model.startswith("openai/") or not isinstance(api_base, str) or not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    if host == "openai.com" or host.endswith(".openai.com"):
        return False  # LiteLLM flattens schemas and strips cache flags for OpenAI's own API
    return unchanged(model.removeprefix("openai/"))


def _resolved(value: Any) -> str | None:
    """A parameter's value, `os.environ/NAME` read as LiteLLM reads it when the Router is built
    (the model list's loader has checked that the variable is set)."""
    if value is None:
        return None
    text = str(value)
    if text.startswith(ENV_REFERENCE_PREFIX):
        return os.environ.get(text.removeprefix(ENV_REFERENCE_PREFIX))
    return text


def _url(api_base: str) -> str:
    base = api_base.rstrip("/")
    return base if "chat/completions" in base else f"{base}/chat/completions"


def sends_unchanged(request: LLMRequest) -> bool:
    """Whether LiteLLM would send the request's messages as they are: text, or user parts of
    text and image URLs (objects). Other parts (files, strings as image URLs), and tool
    messages with parts, LiteLLM rewrites: such a request goes through it."""
    for message in request.messages:
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if message.get("role") != "user" or not isinstance(content, list):
            return False
        for part in content:
            if not isinstance(part, dict):
                return False
            kind = part.get("type")
            if kind == "image_url":
                image = part.get("image_url")
                if not isinstance(image, dict) or "format" in image:
                    return False
            elif kind != "text":
                return False
    return True


class DirectCalls:
    """Calls the direct endpoints over one aiohttp connection pool per event loop."""

    def __init__(self, endpoints: dict[str, Endpoint], *, max_connections: int) -> None:
        self.endpoints = endpoints
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._holder: AsyncIterator[None] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def route(self, request: LLMRequest, fallbacks: list[str]) -> list[Endpoint] | None:
        """The endpoints a call tries in turn, or None when one of them is not direct or the
        request is one LiteLLM would rewrite."""
        route = [self.endpoints.get(name) for name in [request.model, *fallbacks]]
        if any(endpoint is None for endpoint in route) or not sends_unchanged(request):
            return None
        return [endpoint for endpoint in route if endpoint is not None]

    async def complete(
        self, request: LLMRequest, route: list[Endpoint], attempts: list[FailedAttempt]
    ) -> Answer:
        """The first endpoint's answer that does not fail; each failure is added to
        `attempts`, and the first is raised once all have failed."""
        return await self._first(request, route, attempts, self._complete)

    async def stream(
        self, request: LLMRequest, route: list[Endpoint], attempts: list[FailedAttempt]
    ) -> AsyncIterator[LLMDelta | Answer]:
        """Falls back while no answer has begun (an error status, no connection); an error once
        the stream is open is raised as it comes."""
        response, endpoint = await self._first(request, route, attempts, self._open_stream)
        async for event in _read_stream(response, endpoint):
            yield event

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def _first(
        self,
        request: LLMRequest,
        route: list[Endpoint],
        attempts: list[FailedAttempt],
        call: Callable[[LLMRequest, Endpoint], Awaitable[_T]],
    ) -> _T:
        first: LLMCallError | None = None
        for endpoint in route:
            try:
                return await call(request, endpoint)
            except LLMCallError as error:
                first = first or error
                attempts.append(
                    FailedAttempt(
                        attempt=1,
                        error_class=error.kind,
                        message=error.message,
                        deployment=endpoint.deployment_id,
                        model=endpoint.model_name,
                        status_code=error.status_code,
                    )
                )
        assert first is not None  # a route has at least the requested model
        raise first

    async def _complete(self, request: LLMRequest, endpoint: Endpoint) -> Answer:
        try:
            async with await self._send(request, endpoint, stream=False) as response:
                body = await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _transport_error(exc, endpoint) from exc
        try:
            return _answer(json.loads(body), endpoint)
        except _MALFORMED as exc:
            raise _malformed(endpoint, "an answer that is not a chat completion") from exc

    async def _open_stream(
        self, request: LLMRequest, endpoint: Endpoint
    ) -> tuple[aiohttp.ClientResponse, Endpoint]:
        try:
            return await self._send(request, endpoint, stream=True), endpoint
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _transport_error(exc, endpoint) from exc

    async def _send(
        self, request: LLMRequest, endpoint: Endpoint, *, stream: bool
    ) -> aiohttp.ClientResponse:
        """The response once its status is in; an error status raised, classified."""
        seconds = endpoint.stream_timeout_s if stream else endpoint.timeout_s
        response = await (await self._pool()).post(
            endpoint.url,
            data=_body(request, endpoint, stream=stream),
            headers=endpoint.headers,
            timeout=aiohttp.ClientTimeout(sock_connect=seconds, sock_read=seconds),
        )
        if response.status >= 400:
            async with response:
                raise _status_error(response.status, await response.read(), response.headers)
        return response

    async def _pool(self) -> aiohttp.ClientSession:
        """The running loop's session. Unless `aclose` closes it first, it is closed while
        its loop still runs by the async generator that holds it open being closed, by
        `shutdown_asyncgens` as the loop ends (`asyncio.run` and `asyncio.Runner` call it),
        or when the client is dropped (a gateway built for one command or test)."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None:
            _dispose(session)  # its loop ended without closing its async generators
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, limit_per_host=self._max_connections
        )
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        self._loop = loop
        self._holder = _held_open(self._session)
        await anext(self._holder)
        if self._finalizer is not None:
            self._finalizer.detach()
        # A client dropped in a reference cycle is collected at some later pass, possibly
        # once its loop is gone: its session is then closed as it goes.
        self._finalizer = weakref.finalize(self, _dispose, self._session)
        return self._session


async def _held_open(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    try:
        yield
    finally:
        _dispose(session)


def _dispose(session: aiohttp.ClientSession) -> None:
    """Closes a session without awaiting: aiohttp's own synchronous connector teardown (its
    finalizer's), which closes the connections on their loop while it still runs."""
    connector = session.connector
    if connector is not None and not connector.closed:
        connector._close()


def _body(request: LLMRequest, endpoint: Endpoint, *, stream: bool) -> bytes:
    """The body LiteLLM sends: messages without their null fields, the options that are set,
    `stream` always; the tools' JSON as serialised once per tool (`app.llm.wire`)."""
    messages = [
        message if None not in message.values() else _without_nulls(message)
        for message in request.messages
    ]
    body: dict[str, Any] = {"model": endpoint.upstream_model, "messages": messages}
    if request.tools and request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    optional = {
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "stop": request.stop or None,
        "response_format": request.response_format,
    }
    body.update((key, value) for key, value in optional.items() if value is not None)
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    document = json.dumps(body)
    if request.tools:
        document = f'{document[:-1]}, "tools": {tools_json(request.tools)}}}'
    return document.encode()


def _without_nulls(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if value is not None}


def _answer(document: Any, endpoint: Endpoint) -> Answer:
    """Raises one of `_MALFORMED` for what is not a chat completion."""
    choice = document["choices"][0]
    message = choice.get("message") or {}
    calls = message.get("tool_calls") or []
    return Answer(
        endpoint=endpoint,
        content=_text(message.get("content")),
        reasoning=_text(message.get("reasoning_content") or message.get("reasoning")) or None,
        tool_calls=[
            LLMToolCall(
                id=_text(call.get("id")) or f"call_{index}",
                name=_text((call.get("function") or {}).get("name")) or "",
                arguments=_text((call.get("function") or {}).get("arguments")) or "",
            )
            for index, call in enumerate(calls)
        ],
        finish_reason=_reason(choice.get("finish_reason")),
        usage=_usage(document.get("usage")),
    )


async def _read_stream(
    response: aiohttp.ClientResponse, endpoint: Endpoint
) -> AsyncIterator[LLMDelta | Answer]:
    reply = StreamedReply()
    try:
        async with response:
            async for line in response.content:
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    raise _chunk_error(chunk["error"])
                reply.usage = chunk.get("usage") or reply.usage
                if not chunk.get("choices"):
                    continue
                choice = chunk["choices"][0]
                reply.finish_reason = choice.get("finish_reason") or reply.finish_reason
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                for piece in (
                    reply.delta(_text(reasoning), "reasoning"),
                    reply.delta(_text(delta.get("content"))),
                ):
                    if piece is not None:
                        yield piece
                for call in delta.get("tool_calls") or []:
                    function = call.get("function") or {}
                    index = call.get("index", 0)
                    if not isinstance(index, int):
                        raise TypeError(f"a tool call's index is a {type(index).__name__}")
                    reply.call(
                        index,
                        _text(call.get("id")),
                        _text(function.get("name")),
                        _text(function.get("arguments")),
                    )
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise _transport_error(exc, endpoint) from exc
    except _MALFORMED as exc:
        raise _malformed(endpoint, "a chunk that is not a chat completion chunk") from exc
    yield Answer(
        endpoint=endpoint,
        content=reply.content,
        reasoning=reply.reasoning,
        tool_calls=reply.tool_calls,
        finish_reason=_reason(reply.finish_reason),
        usage=_usage(reply.usage),
    )


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"text expected, not {type(value).__name__}")


def _usage(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) and value else None


def _reason(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _status_error(status: int, body: bytes, headers: Any) -> LLMCallError:
    """An error status, classified as `classify` classifies LiteLLM's exception for it."""
    message, code = _provider_error(body)
    signs = f"{code} {message}".lower()
    kind = kind_of_status(status) or LLMErrorKind.TRANSIENT
    name = _STATUS_NAMES.get(status, "InternalServerError" if status >= 500 else "APIError")
    if status == 400 and any(sign in signs for sign in _CONTEXT_WINDOW_SIGNS):
        kind, name = LLMErrorKind.CONTEXT_WINDOW, "ContextWindowExceededError"
    elif status == 400 and any(sign in signs for sign in _CONTENT_POLICY_SIGNS):
        kind, name = LLMErrorKind.CONTENT_POLICY, "ContentPolicyViolationError"
    return LLMCallError(
        f"{name}: {message[:_MAX_MESSAGE_CHARS]}",
        kind=kind,
        status_code=status,
        retry_after_s=_retry_after(headers.get("retry-after")),
    )


def _chunk_error(error: Any) -> LLMCallError:
    """An error a server sent inside a stream it had opened with 200 (vLLM, SGLang)."""
    if not isinstance(error, dict):
        return _status_error(500, json.dumps({"error": {"message": str(error)}}).encode(), {})
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return _status_error(status, json.dumps({"error": error}).encode(), {})


def _provider_error(body: bytes) -> tuple[str, str]:
    """The provider's message and code from an OpenAI-style error body (or its text)."""
    try:
        document = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip() or "no detail", ""
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or "no detail")
        return message, str(error.get("code") or error.get("type") or "")
    if isinstance(error, str):
        return error, ""
    if isinstance(document, dict) and document.get("message"):
        return str(document["message"]), ""
    return str(document), ""


def _transport_error(exc: BaseException, endpoint: Endpoint) -> LLMCallError:
    """No answer: a timeout (reported as a 408, as LiteLLM does), a connection that failed or
    broke, or a body that is not JSON. The endpoint's address stays out of the message."""
    if isinstance(exc, TimeoutError):
        return LLMCallError(
            f"Timeout: {endpoint.model_name} did not answer within {endpoint.timeout_s:g} s",
            kind=LLMErrorKind.TIMEOUT,
            status_code=408,
        )
    return LLMCallError(
        f"APIConnectionError: {endpoint.model_name}: {type(exc).__name__}",
        kind=LLMErrorKind.TRANSIENT,
    )


def _malformed(endpoint: Endpoint, what: str) -> LLMCallError:
    return LLMCallError(
        f"APIError: {endpoint.model_name} sent {what}", kind=LLMErrorKind.TRANSIENT, status_code=502
    )


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the retry policy's own backoff applies
