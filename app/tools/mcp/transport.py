"""The HTTP client a session to an MCP server uses: it reaches only the address the SSRF guard
checked for the server's URL (a name is resolved once, when the session opens, so a later
answer of DNS cannot move it), and remembers the last HTTP error the server answered."""

import httpx2

from app.chain import ErrorCode
from app.tools.errors import ToolError
from app.tools.net import SsrfGuard
from app.tools.services import NetworkPolicy

# A session holds a GET stream open for server-sent notifications; it may be silent for long.
STREAM_READ_TIMEOUT_S = 300.0


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends every request for `host` to one of `addresses` (the first that accepts a
    connection, kept while it does); the Host header and TLS name stay the host's. Refuses
    any other host."""

    def __init__(self, host: str, addresses: list[str]) -> None:
        self._host = host
        self._addresses = list(addresses)
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)
        # "HTTP 401 Unauthorized" after the server answered a message so; None once it
        # answers one again.
        self.last_error: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.raw_host.decode("ascii") != self._host:
            raise httpx2.ConnectError(f"{request.url.host} is not this session's server")
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            extensions["sni_hostname"] = self._host
        for index, address in enumerate(self._addresses):
            pinned = httpx2.Request(
                request.method,
                request.url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions=extensions,
            )
            try:
                response = await self._inner.handle_async_request(pinned)
            except httpx2.ConnectError:
                if index == len(self._addresses) - 1:
                    raise
                continue
            if index:  # the first that answered is tried first from now on
                self._addresses.insert(0, self._addresses.pop(index))
            break
        if request.method == "POST":  # messages; the GET stream's answers say nothing of them
            status = response.status_code
            failed = status >= 400
            self.last_error = f"HTTP {status} {response.reason_phrase}".strip() if failed else None
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def pinned_client(
    url: str, network: NetworkPolicy, headers: dict[str, str], timeout_s: float
) -> tuple[httpx2.AsyncClient, PinnedTransport]:
    """A client for the MCP server at `url`, pinned to its checked addresses."""
    host, addresses = await checked_destination(url, network)
    transport = PinnedTransport(host, addresses)
    client = httpx2.AsyncClient(
        transport=transport,
        headers=headers,
        timeout=httpx2.Timeout(timeout_s, read=max(timeout_s, STREAM_READ_TIMEOUT_S)),
        trust_env=False,
    )
    return client, transport


async def checked_destination(url: str, network: NetworkPolicy) -> tuple[str, list[str]]:
    """The host of `url` and the addresses the SSRF guard checked for it, to dial and no
    others: `destination_refused` for one it refuses, `tool_unavailable` for a name that
    does not resolve."""
    try:
        destination = await SsrfGuard(network).check(url)
    except ToolError as exc:
        if exc.error_code is not None:
            raise
        raise ToolError(exc.message, error_code=ErrorCode.TOOL_UNAVAILABLE) from None
    return destination.host, [str(address) for address in destination.addresses]
