"""The web tools: `web_fetch` (a page, PDF or text as readable text) and `http_request` (one
HTTP request to a host the tenant allowed). Both go through the SSRF guard, which checks every
address and redirect and connects only to what it checked."""

import asyncio
import json
import ssl
from abc import abstractmethod
from collections.abc import Mapping
from functools import partial
from typing import Any

import httpx

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.dataflow import PRIVATE
from app.tools.errors import ErrorClass, FieldError, InvalidToolArguments, ToolTimeoutError
from app.tools.models import (
    NO_RETRY,
    Egress,
    RetryPolicy,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)
from app.tools.net import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT_S,
    DEFAULT_USER_AGENT,
    Fetched,
    Resolver,
    SsrfGuard,
    WebClient,
    decode_text,
    readable,
    system_resolver,
)
from app.tools.services import NetworkPolicy, SecretUse, resolve_headers

WEB_FETCH = "web_fetch"
HTTP_REQUEST = "http_request"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
MAX_URL_CHARS = 2048
DEFAULT_CHARS = 10_000
MAX_CHARS = 50_000
MAX_OFFSET = 50_000_000
MAX_HEADERS = 32
MAX_HEADER_CHARS = 8192
MAX_BODY_CHARS = 1_000_000
# JSON escaping can nearly double a text; the envelope adds a little.
_RESULT_CHARS = 2 * MAX_CHARS + 4096
# Reading a large page or PDF (in a worker thread) after the download's own time limit.
_READING_S = 30.0
PROGRESS_REPORTS = 10
_ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/*;q=0.8,*/*;q=0.5"
# The request's framing is the client's to set, not the caller's.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
)
_JSON_SUFFIX = "+json"

_URL = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_URL_CHARS,
    "description": "An absolute http:// or https:// URL.",
}
_MAX_CHARS = {
    "type": "integer",
    "minimum": 100,
    "maximum": MAX_CHARS,
    "default": DEFAULT_CHARS,
    "description": f"Return at most this many characters of text (default {DEFAULT_CHARS}).",
}


class _WebTool(BaseTool):
    """What both web tools share: their limits and one guarded request per call."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        user_agent: str = DEFAULT_USER_AGENT,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.user_agent = user_agent
        self._resolver = resolver
        self._ssl_context: ssl.SSLContext | None = None
        self._definition = self._describe(timeout_s)

    @staticmethod
    @abstractmethod
    def _describe(timeout_s: float) -> ToolDefinition: ...

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def _request(
        self,
        context: ToolCallContext,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        listed_only: bool = False,
        progress: "_Progress | None" = None,
    ) -> Fetched:
        name = self.definition.name
        if self._ssl_context is None:  # loading the CA bundle takes ~18 ms: once, off the loop
            self._ssl_context = await asyncio.to_thread(httpx.create_ssl_context, trust_env=False)
        services = context.services
        guard = SsrfGuard(services.network if services else NetworkPolicy(), self._resolver)
        client = WebClient(
            guard,
            self._ssl_context,
            tool=name,
            max_bytes=self.max_bytes,
            timeout_s=self.timeout_s,
            user_agent=self.user_agent,
            listed_only=listed_only,
        )
        try:
            async with asyncio.timeout(self.timeout_s), client:
                return await client.request(
                    method, url, headers=headers, content=content, on_progress=progress
                )
        except TimeoutError:
            raise ToolTimeoutError(f"{name}: {url} took longer than {self.timeout_s:g} s") from None


class _Progress:
    """Reports a download through the call's context about `PROGRESS_REPORTS` times: at each
    tenth of the Content-Length (with the fraction done), or of the byte cap without one; the
    last report says it is done (fraction 1)."""

    def __init__(self, context: ToolCallContext, max_bytes: int) -> None:
        self._context = context
        self._max_bytes = max_bytes
        self._step = 0
        self._done = False

    def __call__(self, read: int, downloaded: int, length: int | None) -> None:
        fraction = min(downloaded / length, 1.0) if length else None
        done = fraction if fraction is not None else read / self._max_bytes
        step = int(done * PROGRESS_REPORTS)
        if step > self._step:
            self._step = step
            self._report(read, fraction)

    def finish(self, read: int) -> None:
        if not self._done:
            self._report(read, 1.0)

    def _report(self, read: int, fraction: float | None) -> None:
        self._done = fraction == 1.0
        self._context.progress(f"{read} bytes", fraction)


def _web_fetch_definition(timeout_s: float) -> ToolDefinition:
    return ToolDefinition(
        name=WEB_FETCH,
        type=ToolType.EXTERNAL,
        description=(
            "Fetches a public web page (GET) and returns it as readable text: HTML as Markdown "
            "(headings, links, lists, tables kept; scripts and navigation removed), PDF as its "
            "text, JSON and plain text as they are. Long documents come in windows: the result's "
            "`next_offset`, when set, is the `offset` of the next window. Private, loopback and "
            "cloud metadata addresses are refused unless the tenant allowed them."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": _URL,
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_OFFSET,
                    "default": 0,
                    "description": "Skip this many characters of the text (for the next window).",
                },
                "max_chars": _MAX_CHARS,
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        returns_description=(
            "An object with url, final_url (after redirects), status, content_type, title, "
            "content, truncated (the download stopped at the size limit), bytes (downloaded) "
            "and next_offset (null when the text ends in this window)."
        ),
        timeout_s=timeout_s + _READING_S,
        retry=RetryPolicy(max_attempts=2, retry_on=frozenset({ErrorClass.TRANSIENT})),
        idempotent=True,
        max_result_chars=_RESULT_CHARS,
        # Anyone may have written the page; its URL may carry whatever the run put in it.
        untrusted_output=True,
        egress=Egress.URL,
        visibility=ToolVisibilityConfig(summary_template="Fetched {final_url} ({status})"),
    )


class WebFetchTool(_WebTool):
    """GETs a URL and returns what it says as text, within the byte cap and time limit."""

    _describe = staticmethod(_web_fetch_definition)

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        url: str = arguments["url"]
        offset: int = arguments.get("offset", 0)
        max_chars: int = arguments.get("max_chars", DEFAULT_CHARS)
        progress = _Progress(context, self.max_bytes)
        fetched = await self._request(
            context, "GET", url, headers={"Accept": _ACCEPT}, progress=progress
        )
        progress.finish(len(fetched.body))
        end = offset + max_chars
        page = await asyncio.to_thread(
            readable,
            fetched.body,
            fetched.media_type,
            fetched.charset,
            chars=end + 1,
            truncated=fetched.truncated,
        )
        return ToolOutput(
            value={
                "url": url,
                "final_url": fetched.final_url,
                "status": fetched.status,
                "content_type": fetched.media_type or None,
                "title": page.title,
                "content": page.text[offset:end],
                "truncated": fetched.truncated,
                "bytes": len(fetched.body),
                "next_offset": end if len(page.text) > end else None,
            }
        )


def _http_request_definition(timeout_s: float) -> ToolDefinition:
    one_line = "^[^\\r\\n\\x00]*$"
    secret = {
        "type": "object",
        "properties": {
            "secret": {"type": "string", "minLength": 1, "maxLength": 128},
            "prefix": {"type": "string", "maxLength": 64, "pattern": one_line},
        },
        "required": ["secret"],
        "additionalProperties": False,
        "description": "A tenant secret by name, sent as the header's value after `prefix` "
        '(e.g. "Bearer ").',
    }
    header_value = {"type": "string", "maxLength": MAX_HEADER_CHARS, "pattern": one_line}
    return ToolDefinition(
        name=HTTP_REQUEST,
        type=ToolType.EXTERNAL,
        description=(
            "Sends one HTTP request (GET, POST, PUT, PATCH, DELETE or HEAD) to a host the tenant "
            "allowed (its network allow-list) and returns the status, headers and body (parsed "
            'when it is JSON). Header values may be a tenant secret: {"secret": "NAME"}. '
            "Not idempotent: POST, PUT, PATCH and DELETE change things on the other side and are "
            "never repeated automatically; check the result before sending again."
        ),
        parameters={
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": list(METHODS), "default": "GET"},
                "url": _URL,
                "headers": {
                    "type": "object",
                    "maxProperties": MAX_HEADERS,
                    "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"},
                    "additionalProperties": {"anyOf": [header_value, secret]},
                    "description": 'Request headers; a value may be {"secret": "NAME"}.',
                },
                "json": {"description": "A JSON body (sent as application/json)."},
                "body": {
                    "type": "string",
                    "maxLength": MAX_BODY_CHARS,
                    "description": "A text body (instead of json).",
                },
                "max_chars": _MAX_CHARS,
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        returns_description=(
            "An object with status, headers, body (parsed JSON, or text; null for HEAD), "
            "truncated (the body was cut) and final_url (after redirects)."
        ),
        timeout_s=timeout_s + 5,
        retry=NO_RETRY,
        # Whatever the method: a GET may reach an endpoint that acts on it, and the tool
        # cannot tell which ones do.
        idempotent=False,
        max_result_chars=_RESULT_CHARS,
        untrusted_output=True,
        egress=Egress.URL,
        visibility=ToolVisibilityConfig(summary_template="HTTP {status} from {final_url}"),
    )


class HttpRequestTool(_WebTool):
    """One HTTP request, with secret-bearing headers, to a host the run's policy lists."""

    _describe = staticmethod(_http_request_definition)

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        method: str = arguments.get("method", "GET")
        max_chars: int = arguments.get("max_chars", DEFAULT_CHARS)
        if "json" in arguments and "body" in arguments:
            raise InvalidToolArguments(
                HTTP_REQUEST, [FieldError("", "give either json or body, not both")]
            )
        given: dict[str, Any] = arguments.get("headers") or {}
        if reserved := sorted(name for name in given if name.lower() in _RESERVED_HEADERS):
            raise InvalidToolArguments(
                HTTP_REQUEST,
                [FieldError(f"headers.{name}", "is set by the client") for name in reserved],
            )
        headers = await _resolved_headers(given, context)
        _check_header_values(headers)
        content = _body(arguments, headers)
        fetched = await self._request(
            context, method, arguments["url"], headers=headers, content=content, listed_only=True
        )
        body, truncated = _response_body(fetched, method, max_chars)
        return ToolOutput(
            value={
                "status": fetched.status,
                "headers": {
                    name: ", ".join(fetched.headers.get_list(name))
                    for name in fetched.headers.keys()  # noqa: SIM118 (a multi-dict)
                },
                "body": body,
                "truncated": truncated,
                "final_url": fetched.final_url,
            },
            # What a tenant secret opened is not public.
            labels=frozenset({PRIVATE})
            if any(isinstance(v, Mapping) for v in given.values())
            else frozenset(),
        )


async def _resolved_headers(given: Mapping[str, Any], context: ToolCallContext) -> dict[str, str]:
    """The headers with each `{"secret": NAME, "prefix": …}` replaced by prefix + value, as
    the secret's `usable_by` lets this call use it. A value outside ASCII (the client would
    fail naming a character of it and its place) is refused by a field error that shows none
    of it; line breaks are `_check_header_values`' to refuse."""
    secrets = context.services.secrets if context.services else None
    lookup = None
    if secrets is not None:
        lookup = partial(secrets.resolve, use=SecretUse.in_call(context, "tool", HTTP_REQUEST))
    headers = await resolve_headers(given, lookup, check=False)
    if wide := [name for name, value in headers.items() if not value.isascii()]:
        raise InvalidToolArguments(
            HTTP_REQUEST,
            [
                FieldError(f"headers.{name}", "has characters a header cannot carry")
                for name in wide
            ],
        )
    return headers


def _check_header_values(headers: Mapping[str, str]) -> None:
    """Header values (secrets' included) must be one line of Latin-1; the message never
    shows a value."""
    bad = []
    for name, value in headers.items():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            bad.append(FieldError(f"headers.{name}", "has characters a header cannot carry"))
            continue
        if any(char in value for char in "\r\n\x00"):
            bad.append(FieldError(f"headers.{name}", "contains a line break or NUL"))
    if bad:
        raise InvalidToolArguments(HTTP_REQUEST, bad)


def _body(arguments: dict[str, Any], headers: dict[str, str]) -> bytes | None:
    """The request body, with a Content-Type unless the caller set one."""
    typed = any(name.lower() == "content-type" for name in headers)
    if "json" in arguments:
        if not typed:
            headers["Content-Type"] = "application/json"
        return json.dumps(arguments["json"], ensure_ascii=False).encode()
    if "body" in arguments:
        if not typed:
            headers["Content-Type"] = "text/plain; charset=utf-8"
        return str(arguments["body"]).encode()
    return None


def _response_body(fetched: Fetched, method: str, max_chars: int) -> tuple[Any, bool]:
    if method == "HEAD":
        return None, fetched.truncated
    text = decode_text(fetched.body, fetched.charset)
    media = fetched.media_type
    is_json = media == "application/json" or media.endswith(_JSON_SUFFIX)
    if is_json and not fetched.truncated and len(text) <= max_chars:
        try:
            return json.loads(text), False
        except (ValueError, RecursionError):
            pass
    if len(text) > max_chars:
        return text[:max_chars], True
    return text, fetched.truncated
