"""`omniforge api-key create`: a tenant's first key, made on the service's machine and
printed once; usable against the service at once."""

import httpx

from tests.service import Service
from tests.test_cli_agents import _omniforge_here, _settings_env


async def test_the_first_key_is_printed_once_and_works(service: Service, tenant: str) -> None:
    code, out, err = await _omniforge_here(
        "api-key", "create", "--tenant", tenant, "--name", "bootstrap", env=_settings_env(service)
    )
    assert code == 0, err
    secret = out.strip()
    assert secret.startswith("omf_")
    assert secret[:12] in err
    assert "not shown again" in err
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=service.base_url, headers=headers) as client:
        listed = await client.get("/api/v1/api-keys")
    assert listed.status_code == 200, listed.text
    [key] = listed.json()["items"]
    assert (key["name"], key["roles"], key["created_by"]) == ("bootstrap", ["tenant_admin"], "cli")


async def test_an_unknown_tenant_or_role_makes_no_key(service: Service, tenant: str) -> None:
    env = _settings_env(service)
    no_tenant = await _omniforge_here(
        "api-key", "create", "--tenant", "nobody-here", "--name", "x", env=env
    )
    bad_role = await _omniforge_here(
        "api-key", "create", "--tenant", tenant, "--name", "x", "--roles", "root", env=env
    )
    assert no_tenant[0] == 1
    assert "no tenant 'nobody-here'" in no_tenant[2]
    assert bad_role[0] == 1
    assert "unknown roles ['root']" in bad_role[2]
    assert no_tenant[1] == bad_role[1] == ""
