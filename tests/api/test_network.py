"""A tenant's network allow-lists: its own (`allow`: host names and public networks, set by its
admins) and the platform's allowance for it (`platform_allow`: loopback, private ranges, single
ports, set by platform admins only, which its admins see but cannot change); audited, and seen
by its runs' tools. What reaches beyond the public internet, or names the service's own port,
is refused to a tenant admin with 422 naming the entry."""

from datetime import UTC, datetime
from urllib.parse import urlsplit
from uuid import uuid4

import pytest

from app.storage.tenants import TenantRepository, network_allow
from tests.api.helpers import assert_invalid, assert_problem, open_network
from tests.service import Service

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
PLATFORM = {"sub": "ops", "roles": ("platform_admin",)}


def path(tenant: str) -> str:
    return f"/api/v1/tenants/{tenant}/network"


def own_port(service: Service) -> int:
    port = urlsplit(service.base_url).port
    assert port is not None
    return port


async def test_admins_set_the_allow_list_and_the_change_is_audited(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        empty = await admin.get(path(tenant))
        assert empty.status_code == 200
        assert empty.json() == {"allow": [], "platform_allow": []}
        put = await admin.put(
            path(tenant),
            json={
                "allow": ["API.Internal.example", "*.corp.example", "8.8.8.0/24", "2606:4700::/32"]
            },
        )
        assert put.status_code == 200, put.text
        expected = ["api.internal.example", "*.corp.example", "8.8.8.0/24", "2606:4700::/32"]
        assert put.json() == {"allow": expected, "platform_allow": []}
        assert (await admin.get(path(tenant))).json() == put.json()
        audit = await admin.get(
            f"/api/v1/tenants/{tenant}/audit", params={"action": "tenant.network.update"}
        )
    [row] = audit.json()["items"]
    assert row["actor"] == "root"
    assert row["details"]["before"] == {"network_allow": None}
    assert row["details"]["after"] == {"network_allow": {"allow": expected, "platform_allow": []}}
    record = await service.state.tenants.get(tenant)
    assert record is not None
    tools = await service.state.toolbox.for_tenant(record)
    assert tools.network.allows_host("api.internal.example")
    assert tools.network.allows_host("x.corp.example")
    assert not tools.network.allows_host("corp.example.evil")


# What a tenant admin may not open: `{port}` is the service's own port.
NOT_PUBLIC = [
    ("0.0.0.0/0", "overlaps 0.0.0.0/8"),
    ("127.0.0.0/8", "overlaps 127.0.0.0/8 (loopback)"),
    ("::/0", "reaches beyond the public internet"),
    ("64:ff9b::a9fe:a9fe", "overlaps 64:ff9b::/96 (NAT64)"),
    ("10.0.0.0/8", "overlaps 10.0.0.0/8 (private)"),
    ("169.254.169.254", "link-local, with the cloud metadata endpoints"),
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    ("fd00::/8", "unique-local (private)"),
    ("::ffff:127.0.0.1", "overlaps ::ffff:0:0/96 (IPv4-mapped)"),
    ("2002::/16", "6to4"),
    ("2001::/32", "Teredo"),
    ("224.0.0.0/4", "multicast"),
    ("::1", "loopback"),
    ("127.0.0.1:{port}", "an address with a port is a platform allowance"),
    ("[::1]:{port}", "an address with a port is a platform allowance"),
    ("8.8.8.8:{port}", "an address with a port is a platform allowance"),
    ("localhost:{port}", "a host name takes no port"),
    ("localhost", "names this machine"),
    ("0x7f.1", "spells the address 127.0.0.1"),
]


@pytest.mark.parametrize(("entry", "why"), NOT_PUBLIC, ids=[e for e, _ in NOT_PUBLIC])
async def test_a_tenant_admin_may_not_open_what_is_not_the_public_internet(
    service: Service, tenant: str, entry: str, why: str
) -> None:
    entry = entry.format(port=own_port(service))
    async with service.client(tenant, **ADMIN) as admin:
        refused = await admin.put(path(tenant), json={"allow": ["api.example.com", entry]})
        body = assert_invalid(refused, "body.allow.1")
        [error] = body["errors"]
        assert why in error["message"], error
        assert (await admin.get(path(tenant))).json() == {"allow": [], "platform_allow": []}


async def test_entries_that_are_not_hosts_or_cidrs_are_refused(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        for entry in ["10.0.0.0/33", "http://x.example/", "a b", "", "300.1.2.3/8", "[::1"]:
            response = await admin.put(path(tenant), json={"allow": [entry]})
            assert_invalid(response, "body.allow.0")


async def test_a_platform_admins_allowance_is_seen_but_not_changed_by_tenant_admins(
    service: Service, tenant: str
) -> None:
    port = own_port(service)
    async with service.client(tenant, **ADMIN) as admin:
        before = await admin.put(path(tenant), json={"allow": ["docs.example.com"]})
        assert before.status_code == 200, before.text
    opened = await open_network(
        service, tenant, ["127.0.0.1/32", "10.0.0.0/8", f"127.0.0.1:{port}"]
    )
    # the tenant's own list stays as it was
    assert opened == {
        "allow": ["docs.example.com"],
        "platform_allow": ["127.0.0.1/32", "10.0.0.0/8", f"127.0.0.1:{port}"],
    }
    async with service.client(tenant, **ADMIN) as admin:
        assert (await admin.get(path(tenant))).json() == opened
        # its own list changes; the platform's stays
        mine = await admin.put(path(tenant), json={"allow": ["api.example.com"]})
        assert mine.json() == {
            "allow": ["api.example.com"],
            "platform_allow": opened["platform_allow"],
        }
        # sent back as it is, it is accepted; changed, it is not
        again = await admin.put(
            path(tenant),
            json={"allow": ["api.example.com"], "platform_allow": opened["platform_allow"]},
        )
        assert again.status_code == 200, again.text
        for changed in ([], ["0.0.0.0/0"], ["127.0.0.1/32"]):
            refused = await admin.put(
                path(tenant), json={"allow": ["api.example.com"], "platform_allow": changed}
            )
            assert_problem(refused, 403, "forbidden")
            assert "platform admins only" in refused.json()["detail"]
        assert (await admin.get(path(tenant))).json() == mine.json()
        audit = await admin.get(
            f"/api/v1/tenants/{tenant}/audit", params={"action": "tenant.network.update"}
        )
    actors = [row["actor"] for row in audit.json()["items"]]
    assert actors == ["root", "root", "ops", "root"]
    record = await service.state.tenants.get(tenant)
    assert record is not None
    network = (await service.state.toolbox.for_tenant(record)).network
    assert network.allows_host("api.example.com")
    assert {str(n) for n in network.networks} >= {"127.0.0.1/32", "10.0.0.0/8"}


async def test_no_one_lists_a_metadata_endpoint(service: Service, tenant: str) -> None:
    async with service.client(tenant, **PLATFORM) as platform:
        for entry in ["169.254.169.254", "[fd00:ec2::254]:80", "64:ff9b::a9fe:a9fe"]:
            refused = await platform.put(
                path(tenant), json={"platform_allow": ["10.0.0.0/8", entry]}
            )
            body = assert_invalid(refused, "body.platform_allow.1")
            assert "metadata" in body["errors"][0]["message"]
        # a platform admin's own `allow` is the tenant's list: public entries only
        refused = await platform.put(path(tenant), json={"allow": ["10.0.0.0/8"]})
        assert_invalid(refused, "body.allow.0")


async def test_a_list_stored_before_the_lists_were_told_apart_keeps_its_host_names_only(
    service: Service, tenant: str
) -> None:
    async with service.state.database.transaction() as connection:
        await TenantRepository(connection).update(
            tenant, at=datetime.now(UTC), network_allow=["0.0.0.0/0", "::/0", "api.example.com"]
        )
        assert await network_allow(connection, tenant) == ["api.example.com"]
    async with service.client(tenant, **ADMIN) as admin:
        shown = (await admin.get(path(tenant))).json()
    assert shown == {"allow": ["0.0.0.0/0", "::/0", "api.example.com"], "platform_allow": []}
    # Saved again (here by a platform admin opening a network), it keeps what a tenant may set.
    opened = await open_network(service, tenant, ["10.0.0.0/8"])
    assert opened == {"allow": ["api.example.com"], "platform_allow": ["10.0.0.0/8"]}


async def test_members_may_not_change_it_and_other_tenants_do_not_exist(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await open_network(service, other_tenant, ["10.0.0.0/8"])
    async with service.client(tenant) as member:
        refused = await member.put(path(tenant), json={"allow": []})
        assert_problem(refused, 403, "forbidden")
    async with service.client(tenant, **ADMIN) as admin:
        for name in [other_tenant, f"x-{uuid4().hex[:8]}"]:
            read = await admin.get(path(name))
            assert_problem(read, 404, "not-found")
            assert "10.0.0.0" not in read.text
            write = await admin.put(path(name), json={"allow": []})
            assert_problem(write, 404, "not-found")
            opening = await admin.put(path(name), json={"platform_allow": ["10.0.0.0/8"]})
            assert_problem(opening, 404, "not-found")
    async with service.client(other_tenant, **ADMIN) as theirs:
        assert (await theirs.get(path(other_tenant))).json()["platform_allow"] == ["10.0.0.0/8"]
