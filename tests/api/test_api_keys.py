"""API keys: created by tenant admins with at most their own permissions, shown once and
stored hashed, usable wherever a token is, named in the audit log, limited by their own
quotas, revoked at once here and on other instances within their cache time."""

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from sqlalchemy import select

from app.chain.models import utc_now
from app.governance.api_keys import ApiKeys
from app.governance.callers import Caller
from app.resources.api_keys import ApiKeyService
from app.security import AuthenticationFailed, Principal
from app.security.api_keys import secret_digest
from app.security.rbac import permissions_of
from app.storage.tables import api_keys
from tests.api.helpers import assert_problem, script_two_tool_task, stream, submit
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import MODEL, Service, running_service, service_settings

KEYS = "/api/v1/api-keys"
ADMIN = {"sub": "root", "roles": ("tenant_admin",)}


async def _create(service: Service, tenant: str, **body: Any) -> dict[str, Any]:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(KEYS, json={"name": "ci", "roles": ["member"], **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _with_key(service: Service, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {secret}"}, timeout=30
    )


async def test_a_key_is_shown_once_and_stored_only_as_its_digest(
    service: Service, tenant: str
) -> None:
    created = await _create(service, tenant, name="nightly reports", roles=["viewer"])
    secret = created["secret"]
    assert secret.startswith("omf_")
    assert len(secret) == 47
    assert created["prefix"] == secret[:12]
    assert (created["name"], created["roles"], created["status"]) == (
        "nightly reports",
        ["viewer"],
        "active",
    )
    assert created["created_by"] == "root"
    async with service.client(tenant, **ADMIN) as admin:
        listed = await admin.get(KEYS)
        read = await admin.get(f"{KEYS}/{created['id']}")
    assert [item["id"] for item in listed.json()["items"]] == [created["id"]]
    assert read.json()["prefix"] == created["prefix"]
    for response in (listed, read):
        assert secret not in response.text
        assert secret[12:] not in response.text
        assert "secret" not in response.json().get("items", [response.json()])[0]
    async with service.state.database.read() as connection:
        row = (
            await connection.execute(select(api_keys).where(api_keys.c.prefix == secret[:12]))
        ).one()
    assert row.secret_sha256 == secret_digest(secret)
    assert secret[12:] not in json.dumps([str(value) for value in row])


async def test_a_key_works_wherever_a_token_does_and_the_audit_log_names_it(
    service: Service, tenant: str
) -> None:
    created = await _create(service, tenant, roles=["member"])
    actor = f"api-key:{created['prefix']}"
    script_two_tool_task(service.fake_llm)
    async with _with_key(service, created["secret"]) as client:
        accepted = await submit(client)
        events = await stream(client, accepted["task_id"])
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
        chain = await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")
    assert events[-1].json["final_state"] == "completed"
    assert task["user_id"] == actor
    assert chain.status_code == 200
    async with service.client(tenant, **ADMIN) as admin:
        audit = (await admin.get(f"/api/v1/tenants/{tenant}/audit")).json()["items"]
        key = (await admin.get(f"{KEYS}/{created['id']}")).json()
    by_action = {(row["action"], row["actor"]) for row in audit}
    assert ("api_key.create", "root") in by_action
    assert ("chain.stream", actor) in by_action
    assert ("chain.read", actor) in by_action
    assert ("tool.execute", actor) in by_action
    assert key["last_used_at"] is not None


async def test_a_keys_roles_cannot_exceed_its_creators(service: Service, tenant: str) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        refused = await admin.post(KEYS, json={"name": "escalate", "roles": ["platform_admin"]})
        listed = (await admin.get(KEYS)).json()["items"]
    body = assert_problem(refused, 403, "forbidden")
    assert body["errors"][0]["field"] == "body.roles"
    assert "platform_admin" in body["errors"][0]["message"]
    assert listed == []
    # A key may make keys only as far as its own roles go.
    made_by_admin_key = await _create(service, tenant, name="admin key", roles=["tenant_admin"])
    async with _with_key(service, made_by_admin_key["secret"]) as client:
        narrower = await client.post(KEYS, json={"name": "reader", "roles": ["auditor"]})
        wider = await client.post(KEYS, json={"name": "wider", "roles": ["platform_admin"]})
    assert narrower.status_code == 201, narrower.text
    assert narrower.json()["created_by"] == f"api-key:{made_by_admin_key['prefix']}"
    assert_problem(wider, 403, "forbidden")
    member_key = await _create(service, tenant, name="member key", roles=["member"])
    async with _with_key(service, member_key["secret"]) as client:
        assert_problem(
            await client.post(KEYS, json={"name": "x", "roles": ["viewer"]}), 403, "forbidden"
        )


async def test_a_revoked_key_is_refused_at_once_and_listed_as_revoked(
    service: Service, tenant: str
) -> None:
    created = await _create(service, tenant)
    async with _with_key(service, created["secret"]) as client:
        assert (await client.get("/api/v1/tasks")).status_code == 200
        async with service.client(tenant, **ADMIN) as admin:
            revoked = await admin.delete(f"{KEYS}/{created['id']}")
            again = await admin.delete(f"{KEYS}/{created['id']}")
            active = (await admin.get(KEYS)).json()["items"]
            everything = (await admin.get(KEYS, params={"include_revoked": "true"})).json()
            audit = (await admin.get(f"/api/v1/tenants/{tenant}/audit")).json()["items"]
        refused = await client.get("/api/v1/tasks")
    assert (revoked.status_code, again.status_code) == (204, 204)
    body = assert_problem(refused, 401, "unauthorized")
    assert body["detail"] == "the API key was revoked"
    assert active == []
    [item] = everything["items"]
    assert (item["status"], item["revoked_by"]) == ("revoked", "root")
    assert [row["action"] for row in audit].count("api_key.revoke") == 1


async def test_an_expired_key_is_refused(service: Service, tenant: str) -> None:
    of_tenant = await service.state.tenants.get(tenant)
    assert of_tenant is not None
    roles = frozenset(ADMIN["roles"])
    root = Caller(
        Principal(subject="root", tenant_id=tenant, roles=roles), of_tenant, permissions_of(roles)
    )
    keys = ApiKeyService(service.state.database, service.state.api_keys)
    record, secret = await keys.create(
        root,
        of_tenant,
        name="old",
        roles=["viewer"],
        expires_at=utc_now() - timedelta(seconds=1),
    )
    async with _with_key(service, secret) as client:
        refused = await client.get("/api/v1/tasks")
    async with service.client(tenant, **ADMIN) as admin:
        listed = (await admin.get(f"{KEYS}/{record.id}")).json()
    assert assert_problem(refused, 401, "unauthorized")["detail"] == "the API key has expired"
    assert listed["status"] == "expired"


@pytest.mark.parametrize(
    "secret", ["omf_", "omf_" + "x" * 43, "omf_" + "!" * 43, "omf_" + "a" * 500]
)
async def test_an_unknown_or_malformed_key_is_refused(
    service: Service, tenant: str, secret: str
) -> None:
    async with _with_key(service, secret) as client:
        response = await client.get("/api/v1/tasks")
    body = assert_problem(response, 401, "unauthorized")
    assert secret not in response.text or secret == "omf_"
    assert "API key" in body["detail"]


async def test_an_expiry_in_the_past_or_a_per_key_concurrency_is_invalid(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        past = await admin.post(
            KEYS,
            json={"name": "k", "roles": ["viewer"], "expires_at": "2020-01-01T00:00:00Z"},
        )
        concurrent = await admin.post(
            KEYS, json={"name": "k", "roles": ["viewer"], "quotas": {"concurrent_runs": 2}}
        )
        unknown_role = await admin.post(KEYS, json={"name": "k", "roles": ["superuser"]})
    assert_problem(past, 422, "validation-error")
    assert_problem(concurrent, 422, "validation-error")
    assert_problem(unknown_role, 422, "validation-error")


async def test_an_expiry_past_the_calendar_in_utc_is_invalid_and_the_last_day_works(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        # 23:59:59 at UTC-14 on the last day of year 9999 is in year 10000 in UTC.
        beyond = await admin.post(
            KEYS,
            json={"name": "k", "roles": ["viewer"], "expires_at": "9999-12-31T23:59:59-14:00"},
        )
    [error] = assert_problem(beyond, 422, "validation-error")["errors"]
    assert error["field"] == "body.expires_at"
    assert "outside the years 1 to 9999" in error["message"]

    last = await _create(service, tenant, expires_at="9999-12-31T23:59:59+14:00")
    assert last["expires_at"].startswith("9999-12-31T09:59:59")
    assert last["status"] == "active"
    async with _with_key(service, last["secret"]) as client:
        assert (await client.get("/api/v1/me")).status_code == 200


async def test_another_tenants_key_is_not_found(
    service: Service, tenant: str, other_tenant: str
) -> None:
    theirs = await _create(service, other_tenant)
    async with service.client(tenant, **ADMIN) as admin:
        read = await admin.get(f"{KEYS}/{theirs['id']}")
        revoked = await admin.delete(f"{KEYS}/{theirs['id']}")
        listed = (await admin.get(KEYS)).json()["items"]
    assert_problem(read, 404, "not-found")
    assert_problem(revoked, 404, "not-found")
    assert listed == []
    async with _with_key(service, theirs["secret"]) as client:  # still theirs, still usable
        assert (await client.get("/api/v1/tasks")).status_code == 200


async def test_a_keys_daily_budget_stops_its_tasks_and_nobody_elses(
    service: Service, tenant: str
) -> None:
    # A daily cost window of one call: a call reserves its estimate (its prompt and the whole
    # output cap, about $0.0084 here) and settles to what it cost ($0.0012), so the key's
    # first call fits and its second does not.
    created = await _create(
        service,
        tenant,
        name="budgeted",
        quotas={"cost_per_day_usd": "0.009", "max_wait_s": 0},
    )
    service.fake_llm.script(
        MODEL,
        Reply.text("First.", prompt_tokens=1_000, completion_tokens=100),
        Reply.text("Mine.", prompt_tokens=1_000, completion_tokens=100),
    )
    async with _with_key(service, created["secret"]) as client:
        first = await submit(client, input="one")
        first_events = await stream(client, first["task_id"])
        second = await submit(client, input="two")
        second_events = await stream(client, second["task_id"])
    async with service.client(tenant) as member:
        mine = await submit(member, input="mine")
        mine_events = await stream(member, mine["task_id"])
    assert first_events[-1].json["final_state"] == "completed"
    assert second_events[-1].json["final_state"] == "failed"
    assert second_events[-2].json["error_code"] == "rate_limited"
    assert "cost_per_day_usd" in json.dumps(second_events[-2].json)
    assert mine_events[-1].json["final_state"] == "completed"


# Two instances on one database.


@pytest.fixture
async def second(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    """Another instance on the same database, caching no key."""
    settings = service_settings(tmp_path, database_url, fake_llm, api_key_cache_s=0)
    async with running_service(settings, fake_llm) as instance:
        yield instance


async def test_a_key_revoked_on_one_instance_is_refused_by_another(
    service: Service, second: Service
) -> None:
    tenant = await service.create_tenant(f"k-{uuid4().hex[:12]}")
    created = await _create(service, tenant)
    async with _with_key(second, created["secret"]) as there:
        before = await there.get("/api/v1/tasks")
        async with service.client(tenant, **ADMIN) as admin:
            assert (await admin.delete(f"{KEYS}/{created['id']}")).status_code == 204
        after = await there.get("/api/v1/tasks")
    assert before.status_code == 200
    assert_problem(after, 401, "unauthorized")


async def test_an_instance_that_cached_a_key_refuses_it_once_its_cache_time_is_over(
    service: Service, tenant: str
) -> None:
    """The other instances' side of a revocation: the verification they cached holds for at
    most `OMNIFORGE_API_KEY_CACHE_S`, then the revocation is read."""
    now = [0.0]
    elsewhere = ApiKeys(service.state.database, ttl_s=5.0, clock=lambda: now[0])
    created = await _create(service, tenant)
    await elsewhere.verify(created["secret"])
    async with service.client(tenant, **ADMIN) as admin:
        assert (await admin.delete(f"{KEYS}/{created['id']}")).status_code == 204
    now[0] = 4.9
    still = await elsewhere.verify(created["secret"])  # within its cache time
    now[0] = 5.0
    with pytest.raises(AuthenticationFailed, match="revoked"):
        await elsewhere.verify(created["secret"])
    assert still.principal.tenant_id == tenant
