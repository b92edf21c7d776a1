"""An httpx transport that connects only to addresses the SSRF guard checked.

The URL keeps its host name, so the Host header, TLS SNI and certificate verification all stay
on the name; only the TCP connection differs: instead of resolving the name again (which a
DNS-rebinding server would answer with another address), the network backend dials the
addresses pinned for that name when the guard checked it.
"""

import ssl
import typing

import httpcore
import httpx

from app.tools.net.addresses import IPAddress
from app.tools.net.guard import Destination


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Dials, for a host name, only the addresses pinned for it; any other host fails."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()
        self._pins: dict[str, tuple[IPAddress, ...]] = {}

    def pin(self, destination: Destination) -> None:
        self._pins[destination.host] = destination.addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._pins.get(host)
        if not addresses:
            raise httpcore.ConnectError(f"{host} was not checked by the SSRF guard")
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("web tools do not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (HTTP/1.1, no proxies from the environment, which would resolve
    names themselves) over a `PinnedBackend`, verifying TLS with `ssl_context`."""

    def __init__(
        self, backend: PinnedBackend, ssl_context: ssl.SSLContext, *, max_connections: int = 10
    ) -> None:
        # httpx's transport takes no network backend: its connection pool is built here with
        # ours, and its own __init__ (a pool and an SSL context, ~18 ms, for nothing) skipped.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            http1=True,
            http2=False,
            network_backend=backend,
        )
