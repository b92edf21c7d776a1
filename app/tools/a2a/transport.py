"""The HTTP transport a client of a remote A2A agent sends through: every origin it is asked to
reach is checked by the SSRF guard first (the card's interfaces may name other hosts than the
card's own), and its connections dial only the addresses the guard checked, so that a later
answer of DNS cannot move them."""

import ssl

import httpx

from app.chain import ErrorCode
from app.tools.a2a.cards import Origin, origin_of, shown_origin
from app.tools.errors import ToolError
from app.tools.net import (
    Destination,
    DestinationRefused,
    PinnedBackend,
    PinnedTransport,
    SsrfGuard,
)


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx's transport over a `PinnedBackend`, each origin checked by `guard` on its first
    request (`DestinationRefused` for one it refuses, `tool_unavailable` for a name that does
    not resolve). With `origin`, a request to any other origin is refused before anything is
    sent (its headers carry the tenant's credentials for that origin alone). Redirects are not
    followed by the client using it, so every URL it is asked for is one it checked."""

    def __init__(
        self, guard: SsrfGuard, ssl_context: ssl.SSLContext, *, origin: Origin | None = None
    ) -> None:
        self._guard = guard
        self._origin = origin
        self._backend = PinnedBackend()
        self._inner = PinnedTransport(self._backend, ssl_context)
        self._checked: dict[tuple[str, bytes, int | None], Destination] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if self._origin is not None and origin_of(str(url)) != self._origin:
            raise DestinationRefused(
                f"refused {str(url)[:200]}: a remote agent is called only at "
                f"{shown_origin(self._origin)}, the origin it is registered at"
            )
        origin = (url.scheme, url.raw_host, url.port)
        if origin not in self._checked:
            self._checked[origin] = await checked(self._guard, url)
            self._backend.pin(self._checked[origin])
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def checked(guard: SsrfGuard, url: httpx.URL | str) -> Destination:
    """`url` checked by `guard`; a name that does not resolve is `tool_unavailable` (the
    agent cannot be reached), a refusal `destination_refused`."""
    try:
        return await guard.check(url)
    except ToolError as exc:
        if exc.error_code is not None:
            raise
        raise ToolError(exc.message, error_code=ErrorCode.TOOL_UNAVAILABLE) from None
