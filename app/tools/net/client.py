"""HTTP requests through the SSRF guard: every hop checked and its addresses pinned, redirects
followed by hand and re-checked, the body streamed up to a byte cap."""

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from app.tools.errors import ErrorClass, ToolError, ToolTimeoutError
from app.tools.net.guard import Destination, SsrfGuard, parse_url
from app.tools.net.transport import PinnedBackend, PinnedTransport

MAX_REDIRECTS = 5

# Bytes of the body read so far, bytes downloaded (compressed, as Content-Length counts them)
# and the Content-Length when the server sent one.
BodyProgress = Callable[[int, int, int | None], None]


@dataclass(frozen=True, slots=True)
class Fetched:
    """A response: its status and headers, and its body, cut at the cap (`truncated`)."""

    url: str
    final_url: str
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    redirects: int

    @property
    def _content_type(self) -> str:
        return str(self.headers.get("content-type", ""))

    @property
    def media_type(self) -> str:
        return self._content_type.split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for parameter in self._content_type.split(";")[1:]:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                return value.strip().strip("\"'")
        return None


class WebClient:
    """One tool call's HTTP client. `listed_only` makes every hop's host also need the
    policy's explicit leave (`http_request`); headers given by the caller are dropped when a
    redirect leaves the first origin, so that credentials never follow it elsewhere."""

    def __init__(
        self,
        guard: SsrfGuard,
        ssl_context: ssl.SSLContext,
        *,
        tool: str,
        max_bytes: int,
        timeout_s: float,
        user_agent: str,
        listed_only: bool = False,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self._guard = guard
        self._backend = PinnedBackend()
        self._tool = tool
        self._max_bytes = max_bytes
        self._listed_only = listed_only
        self._max_redirects = max_redirects
        self._client = httpx.AsyncClient(
            transport=PinnedTransport(self._backend, ssl_context),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": user_agent},
        )

    async def __aenter__(self) -> "WebClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        on_progress: BodyProgress | None = None,
    ) -> Fetched:
        target = parse_url(url)
        origin = _origin(target)
        own_headers = dict(headers or {})
        previous: httpx.URL | None = None
        for redirects in range(self._max_redirects + 1):
            destination = await self._checked(target, via=previous)
            hop_headers = own_headers if _origin(target) == origin else {}
            request = self._client.build_request(
                method, destination.url, headers=hop_headers, content=content
            )
            response = await self._send(request, destination)
            try:
                if response.is_redirect:
                    previous, target = target, _redirect_target(response)
                    method, content = _redirect_method(response.status_code, method, content)
                    continue
                body, truncated = await self._read(response, destination, on_progress)
            finally:
                await response.aclose()
            return Fetched(
                url=url,
                final_url=str(response.url),
                status=response.status_code,
                headers=response.headers,
                body=body,
                truncated=truncated,
                redirects=redirects,
            )
        raise ToolError(f"{url} redirected more than {self._max_redirects} times; not followed")

    async def _checked(self, url: httpx.URL, *, via: httpx.URL | None) -> Destination:
        destination = await self._guard.check(url, via=via)
        if self._listed_only:
            self._guard.require_listed(destination, self._tool, via=via)
        self._backend.pin(destination)
        return destination

    async def _send(self, request: httpx.Request, destination: Destination) -> httpx.Response:
        try:
            return await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _failure(exc, destination) from None

    async def _read(
        self,
        response: httpx.Response,
        destination: Destination,
        on_progress: BodyProgress | None,
    ) -> tuple[bytes, bool]:
        length = _content_length(response)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                room = self._max_bytes - size
                if len(chunk) > room:
                    chunks.append(chunk[:room])
                    size += room
                    if on_progress is not None:
                        on_progress(size, response.num_bytes_downloaded, length)
                    return b"".join(chunks), True
                chunks.append(chunk)
                size += len(chunk)
                if on_progress is not None:
                    on_progress(size, response.num_bytes_downloaded, length)
        except httpx.HTTPError as exc:
            raise _failure(exc, destination) from None
        return b"".join(chunks), False


def _origin(url: httpx.URL) -> tuple[str, bytes, int | None]:
    return url.scheme, url.raw_host, url.port


def _redirect_target(response: httpx.Response) -> httpx.URL:
    location = response.headers["location"]
    try:
        return response.url.join(location)
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(
            f"{response.url} redirected to an invalid URL {location[:200]!r}: {exc}"
        ) from None


def _redirect_method(status: int, method: str, content: bytes | None) -> tuple[str, bytes | None]:
    """What a browser does: 303 turns anything but HEAD into a GET and drops the body, 301 and
    302 turn a POST into a GET (without its body); 307 and 308 repeat the request as it was."""
    if status == 303:
        return ("HEAD" if method == "HEAD" else "GET"), None
    if status in (301, 302) and method == "POST":
        return "GET", None
    return method, content


def _content_length(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length", "")
    return int(value) if value.isdigit() else None


def _failure(exc: httpx.HTTPError, destination: Destination) -> ToolError:
    where = f"{destination.host}:{destination.port}"
    if isinstance(exc, httpx.RemoteProtocolError) and "location header" in str(exc):
        return ToolError(f"{destination.url} redirected to an invalid URL: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return ToolTimeoutError(f"{where} did not answer in time ({type(exc).__name__})")
    if isinstance(exc, httpx.ConnectError):
        if "SSL" in str(exc):  # a certificate or handshake failure will not pass on a retry
            return ToolError(f"TLS with {where} failed: {exc}")
        return ToolError(f"could not connect to {where}: {exc}", error_class=ErrorClass.TRANSIENT)
    transient = isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError)
    return ToolError(
        f"the request to {where} failed: {type(exc).__name__}: {exc}",
        error_class=ErrorClass.TRANSIENT if transient else ErrorClass.PERMANENT,
    )
