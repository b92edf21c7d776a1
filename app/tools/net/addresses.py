"""What an address is, for the SSRF guard: host literals parsed as a resolver would parse them
(`2130706433`, `0x7f.1`, `017700000001`, `127.1`, `[::ffff:127.0.0.1]`), the form a connection
dials, and why an address is refused (loopback, private, link-local, metadata…)."""

import ipaddress
from collections.abc import Iterator

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance-metadata endpoints (AWS/GCP/Azure/OpenStack, ECS task roles, EKS pod identity,
# Alibaba, AWS over IPv6): they hand out the machine's credentials, so no allow-list opens them.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "100.100.100.200",
        "fd00:ec2::254",
    )
)

_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_TEREDO = ipaddress.IPv6Network("2001::/32")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _ranges(*pairs: tuple[str, str]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(cidr), what) for cidr, what in pairs)


# Every range that is not the public internet (IANA's special-purpose registries, and the
# IPv6 ranges that carry IPv4 addresses), for judging allow-list entries: a network that
# overlaps one of them opens more than public addresses.
NON_PUBLIC: tuple[tuple[Network, str], ...] = _ranges(
    ("0.0.0.0/8", "'this network', with the unspecified address"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (carrier-grade NAT), with a cloud metadata endpoint"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local, with the cloud metadata endpoints"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved, with the broadcast address"),
    ("::/96", "IPv4-compatible, with the unspecified and loopback addresses"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("64:ff9b::/96", "NAT64"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/23", "IETF protocol assignments, with Teredo"),
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
    ("fc00::/7", "unique-local (private), with a cloud metadata endpoint"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)


def non_public_overlap(network: Network) -> str | None:
    """What of `network` is not the public internet ("127.0.0.0/8 (loopback)"), or None for a
    network of public addresses only."""
    for special, what in NON_PUBLIC:
        if special.version == network.version and special.overlaps(network):
            return f"{special} ({what})"
    return None


_HEX_DIGITS = frozenset("0123456789abcdef")
_OCTAL_DIGITS = frozenset("01234567")
_DECIMAL_DIGITS = frozenset("0123456789")


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address `host` denotes without a name lookup, or None for a name.

    IPv4 is read as `inet_aton` (the system resolver) reads it: one to four parts, each decimal,
    hexadecimal (`0x`) or octal (leading `0`), the last filling the remaining bytes. A trailing
    dot is ignored; IPv6 may come bracketed, with a zone (`%25eth0` or `%eth0`).
    """
    text = host.strip("[]") if host.startswith("[") else host
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.replace("%25", "%", 1))
        except ValueError:
            return None
    return _parse_ipv4(text[:-1] if text.endswith(".") else text)


def _parse_ipv4(text: str) -> ipaddress.IPv4Address | None:
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        value = _ipv4_part(part)
        if value is None:
            return None
        values.append(value)
    *head, last = values
    if any(value > 0xFF for value in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for value in head:
        number = number * 256 + value
    return ipaddress.IPv4Address(number * 256 ** (4 - len(head)) + last)


def _ipv4_part(part: str) -> int | None:
    lower = part.lower()
    if lower.startswith("0x"):
        digits, base, allowed = lower[2:], 16, _HEX_DIGITS
        if not digits:
            return 0  # inet_aton reads a bare "0x" as zero
    elif len(lower) > 1 and lower.startswith("0"):
        digits, base, allowed = lower[1:], 8, _OCTAL_DIGITS
    else:
        digits, base, allowed = lower, 10, _DECIMAL_DIGITS
    if not digits or not set(digits) <= allowed:
        return None
    return int(digits, base)


def dialled(address: IPAddress) -> IPAddress:
    """The address a connection to `address` really reaches: an IPv4-mapped IPv6 address
    (`::ffff:a.b.c.d`) is dialled, checked and allow-listed as its IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def refusal_reason(address: IPAddress) -> str | None:
    """Why the guard refuses `address` ("a loopback address", "the NAT64 form of 127.0.0.1, a
    loopback address"…), or None for a public one."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata endpoint"
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_reason(address)
    for form, embedded in _embedded_ipv4(address):
        if (inner := _ipv4_reason(embedded)) is not None:
            return f"the {form} form of {embedded}, {inner}"
    return own_reason(address)


def own_reason(address: IPAddress) -> str | None:
    """Why `address` is refused for the range it is in, leaving aside the IPv4 addresses an
    IPv6 form carries (`carried_ipv4`), which are judged on their own."""
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_reason(address)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata endpoint"
    if any(address in network for network in _NAT64):
        return None  # a NAT64 gateway's way to the public IPv4 address it carries
    return _ipv6_reason(address)


def _ipv4_reason(address: ipaddress.IPv4Address) -> str | None:
    if address in METADATA_ADDRESSES:
        return "a cloud metadata endpoint"
    if address.is_unspecified:
        return "the unspecified address (it reaches this machine)"
    if address in _THIS_NETWORK:
        return "an address of 'this network' (0.0.0.0/8)"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a special-purpose address"
    return None


def _ipv6_reason(address: ipaddress.IPv6Address) -> str | None:
    if address.is_unspecified:
        return "the unspecified address (it reaches this machine)"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_site_local:
        return "a site-local address"
    if address in _UNIQUE_LOCAL:
        return "a unique-local (private) address"
    if address in _IPV4_COMPATIBLE:
        return "an IPv4-compatible address (deprecated)"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private or not address.is_global:
        return "a special-purpose address"
    return None


def carried_ipv4(address: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries (IPv4-mapped, IPv4-compatible, 6to4, NAT64,
    Teredo's server and client); none for an IPv4 address or a plain IPv6 one. A connection
    to such an address may end at the IPv4 address, so the guard judges it by them."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    return tuple(dict.fromkeys(embedded for _, embedded in _embedded_ipv4(address)))


def is_metadata(address: IPAddress) -> bool:
    """Whether `address` is a cloud metadata endpoint, or an IPv6 form carrying one."""
    return address in METADATA_ADDRESSES or any(
        carried in METADATA_ADDRESSES for carried in carried_ipv4(address)
    )


def _embedded_ipv4(address: ipaddress.IPv6Address) -> Iterator[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, by the form that carries them."""
    if address.ipv4_mapped is not None:
        yield "IPv4-mapped", address.ipv4_mapped
    packed = address.packed
    if address in _IPV4_COMPATIBLE and not (address.is_unspecified or address.is_loopback):
        yield "IPv4-compatible", ipaddress.IPv4Address(packed[12:])
    if address.sixtofour is not None:
        yield "6to4", address.sixtofour
    if any(address in network for network in _NAT64):
        yield "NAT64", ipaddress.IPv4Address(packed[12:])
    if address in _TEREDO and address.teredo is not None:
        server, client = address.teredo
        yield "Teredo", client
        yield "Teredo server", server
