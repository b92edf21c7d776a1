"""A tenant's network allow-list: where its HTTP tools and MCP servers may go past the SSRF
guard, set by its admins, audited, and seen by its runs' tools."""

from uuid import uuid4

from tests.api.helpers import assert_invalid, assert_problem, configure
from tests.service import Service


async def test_admins_set_the_allow_list_and_the_change_is_audited(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        empty = await admin.get(f"/api/v1/tenants/{tenant}/network")
        assert empty.status_code == 200
        assert empty.json() == {"allow": []}
        put = await admin.put(
            f"/api/v1/tenants/{tenant}/network",
            json={"allow": ["127.0.0.1/32", "API.Internal.example", "*.corp.example", "fd00::/8"]},
        )
        assert put.status_code == 200, put.text
        expected = ["127.0.0.1/32", "api.internal.example", "*.corp.example", "fd00::/8"]
        assert put.json() == {"allow": expected}
        assert (await admin.get(f"/api/v1/tenants/{tenant}/network")).json() == {"allow": expected}
        audit = await admin.get(
            f"/api/v1/tenants/{tenant}/audit", params={"action": "tenant.network.update"}
        )
    [row] = audit.json()["items"]
    assert row["actor"] == "root"
    assert row["details"]["before"] == {"network_allow": None}
    assert row["details"]["after"] == {"network_allow": expected}
    record = await service.state.tenants.get(tenant)
    assert record is not None
    tools = await service.state.toolbox.for_tenant(record)
    assert tools.network.allows_host("api.internal.example")
    assert tools.network.allows_host("x.corp.example")
    assert not tools.network.allows_host("corp.example.evil")


async def test_entries_that_are_not_hosts_or_cidrs_are_refused(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        for entry in ["10.0.0.0/33", "http://x.example/", "a b", "", "300.1.2.3/8"]:
            response = await admin.put(f"/api/v1/tenants/{tenant}/network", json={"allow": [entry]})
            assert_invalid(response, "body.allow.0")


async def test_members_may_not_change_it_and_other_tenants_do_not_exist(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await configure(service, other_tenant, "network", {"allow": ["10.0.0.0/8"]})
    async with service.client(tenant) as member:
        refused = await member.put(f"/api/v1/tenants/{tenant}/network", json={"allow": []})
        assert_problem(refused, 403, "forbidden")
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        for name in [other_tenant, f"x-{uuid4().hex[:8]}"]:
            read = await admin.get(f"/api/v1/tenants/{name}/network")
            assert_problem(read, 404, "not-found")
            assert "10.0.0.0" not in read.text
            write = await admin.put(f"/api/v1/tenants/{name}/network", json={"allow": []})
            assert_problem(write, 404, "not-found")
