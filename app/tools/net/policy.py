"""Where outbound calls may go beyond the public internet: the grammar of allow-list entries,
which of them a tenant may set itself, the `NetworkPolicy` they make, and the service's own
listening ports (`ServiceListeners`), which no network entry opens.

Entries: a host name (`api.example.com`) or wildcard (`*.corp.example`), which `http_request`
may call but which never opens a private address by itself; an address or CIDR (`10.1.0.0/16`,
`2001:db8::/32`, in their plain form); or an address with a port
(`127.0.0.1:8000`, `[::1]:8000`), which opens that port of that address alone. A tenant's own
entries are host names and public CIDRs; the rest is the platform's (a platform admin's
allowance for one tenant, or the deployment's `OMNIFORGE_NETWORK_ALLOW`)."""

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from app.tools.net.addresses import (
    IPAddress,
    Network,
    carried_ipv4,
    is_metadata,
    non_public_overlap,
    own_reason,
    parse_ip_literal,
    refusal_reason,
)

_HOST = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
Endpoint = tuple[IPAddress, int]


@dataclass(frozen=True, slots=True)
class Entry:
    """One allow-list entry, read: exactly one of `host`, `network` and `endpoint`."""

    text: str
    host: str | None = None
    network: Network | None = None
    endpoint: Endpoint | None = None


def parse_entry(text: str) -> Entry:
    """`text` as an allow-list entry (see the module's grammar), in its normal form; a
    `ValueError` says what is wrong with it."""
    entry = text.strip()
    if not entry:
        raise ValueError("an entry may not be empty")
    if "%" in entry:
        raise ValueError(f"{entry!r}: an address with a zone (%…) cannot be listed")
    if entry.startswith("["):
        return _bracketed(entry)
    if "/" in entry:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ValueError(f"{entry!r} is not a CIDR: {exc}") from None
        return Entry(str(network), network=network)
    address = parse_ip_literal(entry)
    if address is not None:
        if address.version == 4 and str(address) != entry.rstrip("."):
            # A resolver's reading (`0x7f.1`, `2130706433`): said plainly, or it would read
            # as a host name to one and as an address to another.
            raise ValueError(f"{entry!r} spells the address {address}: write it as {address}")
        return _single(address)
    head, colon, port = entry.rpartition(":")
    if colon and ":" not in head:
        host_address = parse_ip_literal(head)
        if host_address is None:
            raise ValueError(
                f"{entry!r}: a host name takes no port; a port goes with an address "
                "(`127.0.0.1:8000`, `[::1]:8000`)"
            )
        return _endpoint(host_address, port, entry)
    host = entry.lower().rstrip(".")
    if not _HOST.match(host) or len(host) > 253:
        raise ValueError(
            f"{entry!r} is neither a host name (`api.example.com`, `*.corp.example`), an "
            "address or CIDR (`10.1.0.0/16`), nor an address with a port (`127.0.0.1:8000`)"
        )
    return Entry(host, host=host)


def _bracketed(entry: str) -> Entry:
    inside, bracket, rest = entry[1:].partition("]")
    address = parse_ip_literal(inside) if bracket and ":" in inside else None
    if address is None:
        raise ValueError(f"{entry!r}: brackets hold an IPv6 address (`[::1]:8000`)")
    if not rest:
        return _single(address)
    if not rest.startswith(":"):
        raise ValueError(f"{entry!r}: a port follows the brackets after a colon")
    return _endpoint(address, rest[1:], entry)


def _single(address: IPAddress) -> Entry:
    network = ipaddress.ip_network(address)
    return Entry(str(network), network=network)


def _endpoint(address: IPAddress, port: str, entry: str) -> Entry:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{entry!r}: {port!r} is not a port (1-65535)")
    shown = f"[{address}]" if address.version == 6 else str(address)
    return Entry(f"{shown}:{int(port)}", endpoint=(address, int(port)))


def tenant_refusal(entry: Entry) -> str | None:
    """Why a tenant admin may not list `entry` (only a platform admin may), or None: a
    tenant's entries are host names and networks of public addresses, without ports."""
    if entry.endpoint is not None:
        return (
            "an address with a port is a platform allowance; a tenant lists host names and "
            "public networks only"
        )
    if entry.network is not None:
        overlap = non_public_overlap(entry.network)
        if overlap is not None:
            return (
                f"{entry.text} reaches beyond the public internet (it overlaps {overlap}); "
                "only a platform admin may open such addresses for a tenant"
            )
    if entry.host is not None and (entry.host in _LOCAL_NAMES or entry.host.endswith(".localhost")):
        return f"{entry.host} names this machine; only a platform admin may open it"
    return None


def platform_refusal(entry: Entry) -> str | None:
    """Why no one may list `entry`: a cloud metadata endpoint (in any IPv6 form) stays
    refused whatever the lists say, so an entry naming one alone would be a lie."""
    single = entry.endpoint[0] if entry.endpoint is not None else None
    if entry.network is not None and entry.network.num_addresses == 1:
        single = entry.network.network_address
    if single is not None and is_metadata(single):
        return f"{entry.text} is a cloud metadata endpoint, which nothing opens"
    return None


def is_local_address(address: IPAddress) -> bool:
    """Whether `address` is one of this machine's own: loopback, unspecified, or one the
    machine can bind a socket to (an address of one of its interfaces)."""
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


class ServiceListeners:
    """The ports this service listens on, as its server binds them. A connection to one of
    them on one of the machine's own addresses reaches the service itself (its metrics, its
    other tenants' data), so the guard refuses it whatever network entries say; only an
    entry naming that address and port exactly opens it."""

    def __init__(self, ports: Iterable[int] = ()) -> None:
        self._ports = set(ports)

    def add(self, port: int) -> None:
        self._ports.add(port)

    @property
    def ports(self) -> frozenset[int]:
        return frozenset(self._ports)

    def reaches(self, address: IPAddress, port: int) -> bool:
        return port in self._ports and is_local_address(address)


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Where a run's outbound calls may go beyond the public internet. `hosts` are exact names
    (lower case) or `*.suffix` wildcards; `networks` are CIDRs; `endpoints` single ports of
    single addresses. They come from the deployment's settings and the tenant's lists (its own
    public entries, its platform allowance): a network or endpoint lets a refused address
    through the SSRF guard (a cloud metadata endpoint never), and `http_request` reaches only
    listed hosts. `service` names the service's own ports, which only an endpoint opens."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    endpoints: frozenset[Endpoint] = frozenset()
    service: ServiceListeners | None = None

    @classmethod
    def of(
        cls, entries: Iterable[str], *, service: ServiceListeners | None = None
    ) -> "NetworkPolicy":
        """From entries (see `parse_entry`); text that is no entry is kept as a host name,
        which matches no host."""
        hosts: set[str] = set()
        networks: list[Network] = []
        endpoints: set[Endpoint] = set()
        for text in entries:
            try:
                entry = parse_entry(text)
            except ValueError:
                hosts.add(text.strip().lower().rstrip("."))
                continue
            if entry.host is not None:
                hosts.add(entry.host)
            elif entry.network is not None:
                networks.append(entry.network)
            elif entry.endpoint is not None:
                endpoints.add(entry.endpoint)
        return cls(frozenset(hosts), tuple(networks), frozenset(endpoints), service)

    def merged(self, other: "NetworkPolicy") -> "NetworkPolicy":
        return NetworkPolicy(
            self.hosts | other.hosts,
            self.networks + other.networks,
            self.endpoints | other.endpoints,
            self.service or other.service,
        )

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host in self.hosts:
            return True
        return any(
            pattern.startswith("*.") and host.endswith(pattern[1:]) for pattern in self.hosts
        )

    def allows_address(self, address: IPAddress, port: int | None = None) -> bool:
        """Whether an entry lists `address` (an endpoint: only on its `port`). An IPv6 form
        carrying IPv4 addresses is listed when each of them is, whatever IPv6 networks say;
        a cloud metadata endpoint never is."""
        if is_metadata(address):
            return False
        carried = carried_ipv4(address)
        if carried:
            return all(self._lists(inner, port) for inner in carried)
        return self._lists(address, port)

    def opens(self, address: IPAddress, port: int | None = None) -> bool:
        """Whether the guard may connect to `address`, which it refuses for what it is. An
        IPv6 form is judged by the IPv4 addresses it carries (each public or listed) and by
        its own range (public or listed); a cloud metadata endpoint is never opened."""
        if is_metadata(address):
            return False
        for inner in carried_ipv4(address):
            if refusal_reason(inner) is not None and not self._lists(inner, port):
                return False
        return own_reason(address) is None or self._lists(address, port)

    def reaches_service(self, address: IPAddress, port: int) -> bool:
        """Whether a connection to `address`:`port` may reach this service itself, and no
        endpoint entry names that address and port."""
        if self.service is None:
            return False
        return any(
            self.service.reaches(candidate, port) and (candidate, port) not in self.endpoints
            for candidate in (address, *carried_ipv4(address))
        )

    def _lists(self, address: IPAddress, port: int | None) -> bool:
        if any(address in network for network in self.networks):
            return True
        return port is not None and (address, port) in self.endpoints
