"""Host literals are read as the system resolver reads them, and every kind of address the
guard refuses is named for what it is, in every IPv6 form that carries it."""

import ipaddress
import socket

import pytest

from app.tools.net.addresses import dialled, parse_ip_literal, refusal_reason


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("10.0x1.0.1", "10.1.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0XA9.0XFE.0XA9.0XFE", "169.254.169.254"),
        ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
        ("::1", "::1"),
        ("fe80::1%25eth0", "fe80::1%eth0"),
    ],
)
def test_numeric_hosts_are_read_as_addresses(host: str, address: str) -> None:
    assert parse_ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "017700000001", "0177.0.0.1", "127.1"])
def test_the_reading_agrees_with_the_system_resolver(host: str) -> None:
    [(*_, sockaddr)] = socket.getaddrinfo(host, 80, type=socket.SOCK_STREAM)

    assert parse_ip_literal(host) == ipaddress.ip_address(sockaddr[0])


@pytest.mark.parametrize(
    "host",
    ["example.com", "localhost", "1.2.3.4.5", "256.1.1.1", "1.2.3.0x100", "4294967296", "08.1",
     "0x1g", "", "١٢٧.0.0.1", "1..1", "::gg"],
)  # fmt: skip
def test_names_and_malformed_numbers_are_not_addresses(host: str) -> None:
    assert parse_ip_literal(host) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("169.254.169.254", "a cloud metadata endpoint"),
        ("169.254.1.1", "a link-local address"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("100.100.100.200", "a cloud metadata endpoint"),
        ("224.0.0.1", "a multicast address"),
        ("240.0.0.1", "a reserved address"),
        ("255.255.255.255", "a reserved address"),
        ("0.0.0.0", "the unspecified address (it reaches this machine)"),
        ("0.1.2.3", "an address of 'this network' (0.0.0.0/8)"),
        ("192.0.2.1", "a private address"),  # documentation
        ("198.18.0.1", "a private address"),  # benchmarking
        ("::1", "a loopback address"),
        ("::", "the unspecified address (it reaches this machine)"),
        ("fe80::1", "a link-local address"),
        ("fd00::1", "a unique-local (private) address"),
        ("fc00::1", "a unique-local (private) address"),
        ("fec0::1", "a site-local address"),
        ("ff02::1", "a multicast address"),
        ("fd00:ec2::254", "a cloud metadata endpoint"),
        ("::127.0.0.1", "the IPv4-compatible form of 127.0.0.1, a loopback address"),
        ("::8.8.8.8", "an IPv4-compatible address (deprecated)"),
        ("2002:7f00:1::", "the 6to4 form of 127.0.0.1, a loopback address"),
        ("2002:a9fe:a9fe::", "the 6to4 form of 169.254.169.254, a cloud metadata endpoint"),
        ("64:ff9b::7f00:1", "the NAT64 form of 127.0.0.1, a loopback address"),
        ("64:ff9b::a00:1", "the NAT64 form of 10.0.0.1, a private address"),
        ("64:ff9b:1::a00:1", "the NAT64 form of 10.0.0.1, a private address"),
        ("2001:db8::1", "a special-purpose address"),  # documentation
        ("2001:0:808:808::fefe:fefe", "a special-purpose address"),  # Teredo, public ends
        ("2001:0:808:808::80ff:fffe", "the Teredo form of 127.0.0.1, a loopback address"),
        ("2001::1", "the Teredo form of 255.255.255.254, a reserved address"),
    ],
)
def test_refused_addresses_are_named_for_what_they_are(address: str, reason: str) -> None:
    assert refusal_reason(dialled(ipaddress.ip_address(address))) == reason


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None


def test_an_ipv4_mapped_address_is_dialled_and_judged_as_its_ipv4_address() -> None:
    mapped = ipaddress.ip_address("::ffff:169.254.169.254")

    assert dialled(mapped) == ipaddress.ip_address("169.254.169.254")
    assert refusal_reason(dialled(mapped)) == "a cloud metadata endpoint"
    assert dialled(ipaddress.ip_address("8.8.8.8")) == ipaddress.ip_address("8.8.8.8")
