"""Tenants: created by platform admins (or `omniforge tenant create`), and a token whose
tenant is unknown or disabled is refused before anything else."""

from pathlib import Path
from uuid import uuid4

from tests.api.helpers import assert_problem
from tests.api.test_auth import ROUTES
from tests.service import Service
from tests.test_cli import _omniforge

PLATFORM = ("platform_admin",)


async def test_a_token_of_an_unknown_tenant_is_refused_on_every_route(service: Service) -> None:
    """Each documented route, with a token of a tenant never created (another for each
    route); the routes that answer otherwise are named together."""
    wrong: dict[str, str] = {}
    for route in ROUTES:
        ghost = f"ghost-{uuid4().hex[:8]}"
        url = route.url(task_id=str(uuid4()), chain_id=str(uuid4()), tenant_id=ghost)
        async with service.client(ghost, roles=PLATFORM) as client:
            response = await client.request(route.method, url, **route.request_kwargs())
        try:
            body = assert_problem(response, 403, "tenant-unknown")
            assert ghost in body["detail"]
        except AssertionError as exc:
            wrong[str(route)] = f"{response.status_code}: {exc!r}"
    assert wrong == {}


async def test_a_platform_admin_creates_a_tenant_whose_tokens_work_at_once(
    service: Service, tenant: str
) -> None:
    new = f"acme-{uuid4().hex[:8]}"
    async with service.client(tenant, sub="ops", roles=PLATFORM) as ops:
        created = await ops.post("/api/v1/tenants", json={"id": new, "name": "Acme"})
        again = await ops.post("/api/v1/tenants", json={"id": new, "name": "Acme again"})
        invalid = await ops.post("/api/v1/tenants", json={"id": "-bad id", "name": "x"})
        read = await ops.get(f"/api/v1/tenants/{new}")
        listed = await ops.get("/api/v1/tenants", params={"limit": 200})
    async with service.client(new, sub="first-user") as member:
        tasks = await member.get("/api/v1/tasks")

    assert created.status_code == 201, created.text
    assert created.json()["id"] == new
    assert created.json()["status"] == "active"
    assert_problem(again, 409, "tenant-exists")
    assert assert_problem(invalid, 422, "validation-error")["errors"][0]["field"] == "body.id"
    assert read.json() == created.json()
    assert new in {item["id"] for item in listed.json()["items"]}
    assert tasks.status_code == 200


async def test_a_disabled_tenants_tokens_are_refused_until_it_is_enabled_again(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(other_tenant, sub="ops", roles=PLATFORM) as ops:
        disabled = await ops.patch(f"/api/v1/tenants/{tenant}", json={"status": "disabled"})
        async with service.client(tenant) as member:
            refused = await member.get("/api/v1/tasks")
        enabled = await ops.patch(f"/api/v1/tenants/{tenant}", json={"status": "active"})
        async with service.client(tenant) as member:
            allowed = await member.get("/api/v1/tasks")

    assert disabled.json()["status"] == "disabled"
    assert_problem(refused, 403, "tenant-disabled")
    assert enabled.json()["status"] == "active"
    assert allowed.status_code == 200


async def test_a_tenant_admin_reads_its_own_tenant_only(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant, roles=("tenant_admin",)) as admin:
        own = await admin.get(f"/api/v1/tenants/{tenant}")
        other = await admin.get(f"/api/v1/tenants/{other_tenant}")
        create = await admin.post("/api/v1/tenants", json={"id": "nope", "name": "No"})
    assert own.json()["id"] == tenant
    assert_problem(other, 404, "not-found")
    assert assert_problem(create, 403, "forbidden")["permission"] == "tenant:manage"


async def test_development_has_a_default_tenant(service: Service) -> None:
    async with service.client("default") as client:
        assert (await client.get("/api/v1/tasks")).status_code == 200


async def test_the_tenant_command_creates_lists_and_disables_tenants(tmp_path: Path) -> None:
    env = {"OMNIFORGE_DATA_DIR": str(tmp_path)}
    created = await _omniforge("tenant", "create", "Acme Corp.", env=env)
    named = await _omniforge("tenant", "create", "Beta", "--id", "beta-1", env=env)
    duplicate = await _omniforge("tenant", "create", "Acme Corp.", env=env)
    disabled = await _omniforge("tenant", "disable", "beta-1", env=env)
    listed = await _omniforge("tenant", "list", env=env)

    assert created[:2] == (0, "acme-corp\n")
    assert named[:2] == (0, "beta-1\n")
    assert duplicate[0] == 1
    assert "already exists" in duplicate[2]
    assert disabled[:2] == (0, "beta-1\n")
    assert listed[0] == 0
    assert listed[1].splitlines() == ["acme-corp\tactive\tAcme Corp.", "beta-1\tdisabled\tBeta"]
