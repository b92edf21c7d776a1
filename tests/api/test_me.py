"""/api/v1/me: who the caller is, as the token or the API key says, and nothing for a caller
the service does not know."""

from tests.api.helpers import assert_problem
from tests.service import Service


async def test_a_token_caller_reads_its_tenant_roles_and_permissions(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="vera", roles=("viewer",)) as viewer:
        response = await viewer.get("/api/v1/me")

    assert response.status_code == 200, response.text
    assert response.json() == {
        "subject": "vera",
        "tenant": {"id": tenant, "name": f"Tenant {tenant}"},
        "roles": ["viewer"],
        "permissions": ["chain:read", "file:read", "schedule:read", "task:read"],
        "crosses_tenants": False,
        "api_key": None,
    }


async def test_a_key_caller_reads_the_key_it_used_and_the_keys_own_roles(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        created = (
            await admin.post("/api/v1/api-keys", json={"name": "ci", "roles": ["auditor"]})
        ).json()
    async with service.client() as anonymous:
        me = await anonymous.get(
            "/api/v1/me", headers={"Authorization": f"Bearer {created['secret']}"}
        )
        nobody = await anonymous.get("/api/v1/me")

    assert me.status_code == 200, me.text
    body = me.json()
    assert body["api_key"] == {"id": created["id"], "name": "ci"}
    assert body["roles"] == ["auditor"]
    assert "cost:view" in body["permissions"]
    assert "task:create" not in body["permissions"]
    assert body["tenant"]["id"] == tenant
    assert_problem(nobody, 401, "unauthorized")
