"""The SSRF guard: where a web tool may connect. A URL is parsed, its host resolved (off the
event loop), and every address it resolves to checked against the refused kinds and the run's
`NetworkPolicy`; the connection then dials those checked addresses and no others."""

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from app.chain import ErrorCode
from app.tools.errors import ErrorClass, ToolError
from app.tools.net.addresses import (
    IPAddress,
    carried_ipv4,
    dialled,
    is_metadata,
    parse_ip_literal,
    refusal_reason,
)
from app.tools.net.policy import NetworkPolicy

# A host name and port to the addresses it resolves to; the system's `getaddrinfo` by default.
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]

SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_ALLOW_HINT = (
    "to let tools reach it, add {what} to the tenant's network allow-list "
    "(PUT /api/v1/tenants/{{tenant_id}}/network) or to the operator's OMNIFORGE_NETWORK_ALLOW"
)
_PLATFORM_HINT = (
    "to let tools reach it, add {what} to the tenant's network allow-list that platform "
    "admins keep (`platform_allow`, PUT /api/v1/tenants/{{tenant_id}}/network) or to the "
    "operator's OMNIFORGE_NETWORK_ALLOW"
)


class DestinationRefused(ToolError):
    """The guard refused a URL: a scheme other than http(s), credentials in it, an address it
    refuses, or (for `http_request`) a host the tenant did not allow."""

    def __init__(self, message: str) -> None:
        super().__init__(message, error_code=ErrorCode.DESTINATION_REFUSED)


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked URL: `host` as the connection names it, and the only addresses it may dial."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses the system resolver gives `host`, looked up in a worker thread."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        transient = exc.errno == socket.EAI_AGAIN
        raise ToolError(
            f"could not resolve {host}: {exc.strerror or exc}",
            error_class=ErrorClass.TRANSIENT if transient else ErrorClass.PERMANENT,
        ) from None
    except UnicodeError:
        raise ToolError(f"could not resolve {host}: not a valid host name") from None
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = parse_ip_literal(str(sockaddr[0]))
        if address is not None and address not in addresses:
            addresses.append(address)
    return addresses


def parse_url(text: str | httpx.URL) -> httpx.URL:
    """`text` as a URL the web tools may request: http(s), a host, no credentials."""
    try:
        url = text if isinstance(text, httpx.URL) else httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolError(
            f"{str(text)[:200]!r} is not a valid URL: {exc}",
            error_class=ErrorClass.INVALID_ARGUMENTS,
            error_code=ErrorCode.INVALID_ARGUMENTS,
        ) from None
    if url.scheme not in SCHEMES:
        scheme = f"'{url.scheme}:'" if url.scheme else "no scheme"
        raise DestinationRefused(f"refused {_shown(url)}: {scheme}; only http and https URLs")
    if url.userinfo:
        raise DestinationRefused(
            f"refused {url.copy_with(username=None, password=None)}: a URL may not carry "
            "credentials (user:password@); send them in a header instead"
        )
    if not url.raw_host:
        raise DestinationRefused(f"refused {_shown(url)}: it names no host")
    return url


class SsrfGuard:
    """Checks every URL a web tool is about to request (each redirect included).

    Refused: loopback, private, link-local, multicast, reserved, unspecified and shared
    addresses, IPv6 unique-local and site-local ones, and any IPv6 form carrying a refused IPv4
    address (mapped, compatible, 6to4, NAT64, Teredo), however the host spells them. An entry
    of `policy` lets such an address through (an IPv6 form only where what it carries is let
    through too), except a cloud metadata endpoint, which nothing opens. The service's own
    listening ports on the machine's own addresses are refused whatever networks are listed:
    only an entry naming that address and port opens one. A name that resolves to several
    addresses is refused if any one is.
    """

    def __init__(self, policy: NetworkPolicy, resolver: Resolver = system_resolver) -> None:
        self.policy = policy
        self._resolve = resolver

    async def check(self, target: str | httpx.URL, *, via: httpx.URL | None = None) -> Destination:
        """`target` checked: its addresses, or `DestinationRefused`. `via` is the URL that
        redirected to it, for the message."""
        url = parse_url(target)
        host = url.raw_host.decode("ascii")
        port = url.port or _DEFAULT_PORTS[url.scheme]
        literal = parse_ip_literal(host)
        found = [literal] if literal is not None else list(await self._resolve(host, port))
        if not found:
            raise ToolError(f"could not resolve {host}: no addresses")
        addresses: list[IPAddress] = []
        for address in map(dialled, found):
            reason = refusal_reason(address)
            if reason is not None and not self.policy.opens(address, port):
                raise DestinationRefused(_refusal(_shown(url, via), host, address, reason))
            if self.policy.reaches_service(address, port):
                raise DestinationRefused(_own_port(_shown(url, via), host, address, port))
            if address not in addresses:
                addresses.append(address)
        return Destination(url, host, port, tuple(addresses))

    def require_listed(
        self, destination: Destination, tool: str, *, via: httpx.URL | None = None
    ) -> None:
        """Refuses a destination the policy lists neither by host name nor by every one of
        its addresses (`http_request` reaches only hosts a tenant allowed)."""
        policy = self.policy
        if policy.allows_host(destination.host):
            return
        port = destination.port
        if all(policy.allows_address(address, port) for address in destination.addresses):
            return
        hint = _ALLOW_HINT.format(what=f"'{destination.host}'")
        shown = _shown(destination.url, via)
        raise DestinationRefused(
            f"refused {shown}: {tool} reaches only hosts the tenant allowed, and "
            f"{destination.host} is not on its network allow-list; {hint}"
        )


def _refusal(shown: str, host: str, address: IPAddress, reason: str) -> str:
    subject = f"{address} is" if host == str(address) else f"{host} is {address},"
    if is_metadata(address):
        advice = "no allow-list opens it"
    else:
        # An IPv6 form is opened by what it carries: name that.
        refused = [inner for inner in carried_ipv4(address) if refusal_reason(inner)]
        what = refused[0] if refused else address
        advice = _PLATFORM_HINT.format(what=f"{what} (or a network containing it)")
    return f"refused {shown}: {subject} {reason}; {advice}"


def _own_port(shown: str, host: str, address: IPAddress, port: int) -> str:
    subject = f"{address}" if host == str(address) else f"{host} ({address})"
    exact = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
    return (
        f"refused {shown}: port {port} of {subject} is this service's own listener; only a "
        f"platform allowance naming exactly {exact} opens it"
    )


def _shown(url: httpx.URL, via: httpx.URL | None = None) -> str:
    text = str(url)
    text = text if len(text) <= 200 else text[:200] + "…"
    return text if via is None else f"{text} (a redirect from {_shown(via)})"
