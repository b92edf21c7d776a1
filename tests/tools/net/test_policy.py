"""Allow-list entries and what they open: the entry grammar; which entries a tenant may set (host
names and public networks); every IPv6 form carrying an IPv4 address judged by that address,
however wide an IPv6 network the list opens (`::/0`); cloud metadata endpoints opened by
nothing; the service's own port on this machine refused whatever networks say, opened only by
an entry naming that address and port. Checked by the guard itself (it connects nothing)."""

import ipaddress
import socket

import pytest

from app.tools.net import DestinationRefused, SsrfGuard
from app.tools.net.policy import (
    NetworkPolicy,
    ServiceListeners,
    is_local_address,
    parse_entry,
    platform_refusal,
    tenant_refusal,
)


@pytest.mark.parametrize(
    ("text", "kind", "normal"),
    [
        ("API.Example.com.", "host", "api.example.com"),
        ("*.corp.example", "host", "*.corp.example"),
        ("10.1.2.3", "network", "10.1.2.3/32"),
        ("10.1.2.3/16", "network", "10.1.0.0/16"),
        ("2606:4700:0:0::1111", "network", "2606:4700::1111/128"),
        ("[::1]", "network", "::1/128"),
        ("127.0.0.1:8000", "endpoint", "127.0.0.1:8000"),
        ("[::1]:8000", "endpoint", "[::1]:8000"),
    ],
)
def test_entries_are_read_in_their_normal_form(text: str, kind: str, normal: str) -> None:
    entry = parse_entry(text)

    assert entry.text == normal
    assert getattr(entry, kind) is not None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "may not be empty"),
        ("localhost:8000", "a host name takes no port"),
        ("127.0.0.1:0", "is not a port"),
        ("127.0.0.1:70000", "is not a port"),
        ("[::1]8000", "a port follows the brackets"),
        ("[example.com]:80", "brackets hold an IPv6 address"),
        ("0x7f.1", "spells the address 127.0.0.1"),
        ("2130706433", "spells the address 127.0.0.1"),
        ("fe80::1%eth0", "zone"),
        ("a b", "is neither a host name"),
        ("10.0.0.0/33", "is not a CIDR"),
    ],
)
def test_what_is_no_entry_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_entry(text)


@pytest.mark.parametrize(
    "text",
    ["0.0.0.0/0", "127.0.0.0/8", "::/0", "64:ff9b::a9fe:a9fe", "10.0.0.0/8", "192.168.1.0/24",
     "169.254.169.254", "100.64.0.1", "::1", "fc00::/7", "::ffff:0:0/96", "2002::/16",
     "2001::/32", "64:ff9b:1::/48", "8.0.0.0/4", "127.0.0.1:8000", "8.8.8.8:443", "localhost",
     "a.localhost"],
)  # fmt: skip
def test_a_tenant_lists_no_address_beyond_the_public_internet(text: str) -> None:
    assert tenant_refusal(parse_entry(text)) is not None


@pytest.mark.parametrize(
    "text", ["8.8.8.0/24", "1.1.1.1", "2606:4700::/32", "api.example.com", "*.corp.example"]
)
def test_a_tenant_lists_host_names_and_public_networks(text: str) -> None:
    assert tenant_refusal(parse_entry(text)) is None


@pytest.mark.parametrize(
    "text", ["169.254.169.254", "[fd00:ec2::254]:80", "::ffff:169.254.169.254", "100.100.100.200"]
)
def test_no_one_lists_a_metadata_endpoint(text: str) -> None:
    assert platform_refusal(parse_entry(text)) is not None


def test_a_platform_lists_private_ranges_and_ports() -> None:
    for text in ["10.0.0.0/8", "127.0.0.1", "127.0.0.1:8000", "169.254.0.0/16", "::/0"]:
        assert platform_refusal(parse_entry(text)) is None


async def _refused(policy: NetworkPolicy, url: str) -> str:
    with pytest.raises(DestinationRefused) as refused:
        await SsrfGuard(policy).check(url)
    return refused.value.message


# Forms of 127.0.0.1 and 169.254.169.254 that an IPv6 network would otherwise open.
LOOPBACK_FORMS = [
    ("[64:ff9b::7f00:1]", "NAT64"),
    ("[64:ff9b:1::7f00:1]", "NAT64"),
    ("[2002:7f00:1::]", "6to4"),
    ("[::127.0.0.1]", "IPv4-compatible"),
    ("[2001:0:808:808::80ff:fffe]", "Teredo"),
]
METADATA_FORMS = [
    ("[64:ff9b::a9fe:a9fe]", "NAT64"),
    ("[2002:a9fe:a9fe::]", "6to4"),
    ("[::169.254.169.254]", "IPv4-compatible"),
    ("[::ffff:169.254.169.254]", "cloud metadata"),
]


@pytest.mark.parametrize(("host", "form"), LOOPBACK_FORMS + METADATA_FORMS)
async def test_an_ipv6_network_does_not_open_the_ipv4_address_a_form_carries(
    host: str, form: str
) -> None:
    policy = NetworkPolicy.of(["::/0", "2000::/3", "64:ff9b::/96", "2001::/32"])

    said = await _refused(policy, f"http://{host}:8080/")

    assert form in said
    assert "127.0.0.1" in said or "169.254.169.254" in said


@pytest.mark.parametrize(("host", "form"), LOOPBACK_FORMS)
async def test_a_form_is_opened_with_the_ipv4_address_it_carries(host: str, form: str) -> None:
    policy = NetworkPolicy.of(["127.0.0.0/8", "::/0"])

    destination = await SsrfGuard(policy).check(f"http://{host}:8080/")

    assert destination.port == 8080


@pytest.mark.parametrize(("host", "form"), METADATA_FORMS)
async def test_nothing_opens_a_metadata_endpoint_in_any_form(host: str, form: str) -> None:
    policy = NetworkPolicy.of(["0.0.0.0/0", "::/0", "169.254.169.254:80"])

    said = await _refused(policy, f"http://{host}/latest/meta-data/")

    assert "no allow-list opens it" in said
    assert not policy.allows_address(ipaddress.ip_address(host.strip("[]")), 80)


def _own_port() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


async def test_the_services_own_port_is_refused_whatever_networks_are_listed() -> None:
    with _own_port() as sock:
        port = sock.getsockname()[1]
        service = ServiceListeners([port])
        policy = NetworkPolicy.of(["0.0.0.0/0", "::/0"], service=service)
        for url in [
            f"http://127.0.0.1:{port}/metrics",
            f"http://127.0.0.2:{port}/metrics",
            f"http://0.0.0.0:{port}/",
            f"http://[::1]:{port}/",
            f"http://[::ffff:127.0.0.1]:{port}/",
            f"http://[64:ff9b::7f00:1]:{port}/",
            f"http://localhost:{port}/",
        ]:
            said = await _refused(policy, url)
            assert f"port {port} of" in said, url
            assert "this service's own listener" in said, url
        # another port of the same addresses is what the networks say
        assert (await SsrfGuard(policy).check(f"http://127.0.0.1:{port + 1}/")).port == port + 1
        # an entry naming the address and port opens that one alone
        exact = policy.merged(NetworkPolicy.of([f"127.0.0.1:{port}"]))
        assert (await SsrfGuard(exact).check(f"http://127.0.0.1:{port}/")).port == port
        await _refused(exact, f"http://127.0.0.2:{port}/")


async def test_an_endpoint_opens_one_port_of_one_address() -> None:
    policy = NetworkPolicy.of(["10.1.2.3:8443"])

    assert (await SsrfGuard(policy).check("https://10.1.2.3:8443/")).port == 8443
    said = await _refused(policy, "https://10.1.2.3/")
    assert "10.1.2.3 is a private address" in said


def test_the_machines_own_addresses_are_told_from_others() -> None:
    for text in ["127.0.0.1", "127.8.9.10", "0.0.0.0", "::1", "::"]:
        assert is_local_address(ipaddress.ip_address(text)), text
    for text in ["192.0.2.1", "8.8.8.8", "2001:db8::1"]:
        assert not is_local_address(ipaddress.ip_address(text)), text
