"""Tenant secrets over the API, on both databases: values go in and never come out (no
response, no audit row, no stored row holds one); runs of this instance see a change at once;
only tenant admins manage them, and only their own tenant's."""

import base64
import io
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import text

from app.chain import ErrorCode
from app.resources.secrets import SecretVault
from app.resources.secrets.store import SecretRepository
from app.tools.errors import ToolError
from tests.api.helpers import assert_invalid, assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings

ADMIN = ("tenant_admin",)
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
VALUE = "ghp_Zx81-very-secret-value/ü+="


@pytest.fixture
def vault(service: Service) -> SecretVault:
    """The service's vault, which runs on this instance resolve secrets from."""
    vault = service.state.toolbox.secrets
    assert vault is not None
    return vault


def _url(tenant: str, name: str | None = None) -> str:
    base = f"/api/v1/tenants/{tenant}/secrets"
    return base if name is None else f"{base}/{name}"


def _forms(value: str) -> list[str]:
    """Every form a value could leak in."""
    return [
        value,
        json.dumps(value)[1:-1],
        base64.b64encode(value.encode()).decode(),
        value.encode().hex(),
    ]


def _assert_holds_no_value(document: str, *values: str) -> None:
    for value in values:
        for form in _forms(value):
            assert form not in document


async def _audit(service: Service, tenant: str) -> list[dict[str, Any]]:
    async with service.client(tenant, sub="eve", roles=("auditor",)) as auditor:
        response = await auditor.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": 200})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_value_goes_in_and_no_route_or_audit_row_returns_it(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    replaced_value = "second-value-Ωmega-2026"
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        created = await admin.put(_url(tenant, "GITHUB_TOKEN"), json={"value": VALUE})
        other = await admin.put(_url(tenant, "STRIPE_KEY"), json={"value": "sk_live_other"})
        async with service.client(tenant, sub="ops", roles=ADMIN) as ops:
            replaced = await ops.put(_url(tenant, "GITHUB_TOKEN"), json={"value": replaced_value})
        listed = await admin.get(_url(tenant))
        deleted = await admin.delete(_url(tenant, "STRIPE_KEY"))
        again = await admin.delete(_url(tenant, "STRIPE_KEY"))
        after = await admin.get(_url(tenant))
    audit = await _audit(service, tenant)

    assert created.status_code == 201, created.text
    assert other.status_code == 201, other.text
    assert replaced.status_code == 200, replaced.text
    assert set(created.json()) == {
        "name",
        "usable_by",
        "created_at",
        "updated_at",
        "created_by",
        "updated_by",
    }
    assert created.json()["usable_by"] is None  # created without one: anyone of the tenant
    assert (created.json()["created_by"], created.json()["updated_by"]) == ("root", "root")
    assert (replaced.json()["created_by"], replaced.json()["updated_by"]) == ("root", "ops")
    assert replaced.json()["created_at"] == created.json()["created_at"]
    assert [item["name"] for item in listed.json()["items"]] == ["GITHUB_TOKEN", "STRIPE_KEY"]
    assert listed.json()["items"][0] == replaced.json()
    assert listed.json()["next_cursor"] is None
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert_problem(again, 404, "not-found")
    assert [item["name"] for item in after.json()["items"]] == ["GITHUB_TOKEN"]
    for response in (created, other, replaced, listed, deleted, again, after):
        _assert_holds_no_value(response.text, VALUE, replaced_value, "sk_live_other")

    changes = [event for event in audit if event["resource_type"] == "secret"]
    assert [(e["action"], e["resource_id"], e["actor"]) for e in reversed(changes)] == [
        ("secret.put", "GITHUB_TOKEN", "root"),
        ("secret.put", "STRIPE_KEY", "root"),
        ("secret.put", "GITHUB_TOKEN", "ops"),
        ("secret.delete", "STRIPE_KEY", "root"),
    ]
    assert changes[-1]["details"]["before"] is None  # created
    assert changes[1]["details"]["after"] == {"name": "GITHUB_TOKEN", "usable_by": None}
    _assert_holds_no_value(json.dumps(audit), VALUE, replaced_value, "sk_live_other")


async def test_the_stored_row_holds_neither_the_plaintext_nor_its_base64(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        response = await admin.put(_url(tenant, "DB_PASSWORD"), json={"value": VALUE})
    assert response.status_code == 201, response.text

    async with service.state.database.read() as connection:
        row = (
            await connection.execute(
                text("SELECT * FROM tenant_secrets WHERE tenant_id = :t"), {"t": tenant}
            )
        ).one()
    stored = json.dumps([str(column) for column in row], ensure_ascii=False)
    assert "DB_PASSWORD" in stored
    _assert_holds_no_value(stored, VALUE)
    assert row._mapping["key_id"] == vault.keys.sealing_key_id


async def test_runs_of_this_instance_see_a_change_at_once(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        await admin.put(_url(tenant, "TOKEN"), json={"value": "first-value"})
        first = await vault.value(tenant, "TOKEN")
        await admin.put(_url(tenant, "TOKEN"), json={"value": "second-value"})
        second = await (await vault.resolver(tenant)).resolve("TOKEN")
        await admin.delete(_url(tenant, "TOKEN"))

    assert (first, second) == ("first-value", "second-value")
    with pytest.raises(ToolError) as raised:
        await vault.value(tenant, "TOKEN")
    assert raised.value.error_code is ErrorCode.SECRET_NOT_FOUND


async def test_secrets_are_listed_page_by_page(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        for name in ("c_key", "a_key", "e_key", "b_key", "d_key"):
            response = await admin.put(_url(tenant, name), json={"value": f"value of {name}"})
            assert response.status_code == 201
        names: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = (await admin.get(_url(tenant), params=params)).json()
            names += [item["name"] for item in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        bad_cursor = await admin.get(_url(tenant), params={"cursor": "AAE"})

    assert names == ["a_key", "b_key", "c_key", "d_key", "e_key"]
    assert_invalid(bad_cursor, "query.cursor")


async def test_another_tenants_secrets_are_not_found_on_every_route(
    service: Service, tenant: str, other_tenant: str, vault: SecretVault
) -> None:
    async with service.client(other_tenant, roles=ADMIN) as theirs:
        await theirs.put(_url(other_tenant, "THEIR_TOKEN"), json={"value": "their-value"})
    async with service.client(tenant, roles=ADMIN) as admin:
        responses = [
            await admin.put(_url(other_tenant, "THEIR_TOKEN"), json={"value": "overwritten"}),
            await admin.put(_url(other_tenant, "NEW"), json={"value": "planted"}),
            await admin.put(
                _url(other_tenant, "THEIR_TOKEN"),
                json={"value": "overwritten", "usable_by": {"roles": ["member"]}},
            ),
            await admin.patch(_url(other_tenant, "THEIR_TOKEN"), json={"usable_by": None}),
            await admin.patch(
                _url(other_tenant, "THEIR_TOKEN"), json={"usable_by": {"agents": ["mine"]}}
            ),
            await admin.get(_url(other_tenant)),
            await admin.delete(_url(other_tenant, "THEIR_TOKEN")),
            await admin.delete(_url(f"ghost-{uuid4().hex[:6]}", "THEIR_TOKEN")),
        ]
    async with service.client(other_tenant, roles=ADMIN) as theirs:
        listed = await theirs.get(_url(other_tenant))

    for response in responses:
        assert_problem(response, 404, "not-found")
        assert "their-value" not in response.text
    assert [item["name"] for item in listed.json()["items"]] == ["THEIR_TOKEN"]
    assert listed.json()["items"][0]["usable_by"] is None
    assert await vault.value(other_tenant, "THEIR_TOKEN") == "their-value"


async def test_a_platform_admin_manages_any_tenants_secrets(
    service: Service, tenant: str, other_tenant: str, vault: SecretVault
) -> None:
    async with service.client(tenant, sub="ops", roles=("platform_admin",)) as ops:
        created = await ops.put(_url(other_tenant, "TOKEN"), json={"value": "set-by-ops"})
        listed = await ops.get(_url(other_tenant))
        deleted = await ops.delete(_url(other_tenant, "TOKEN"))

    assert created.status_code == 201, created.text
    assert [item["name"] for item in listed.json()["items"]] == ["TOKEN"]
    assert deleted.status_code == 204
    [put, delete] = sorted(
        (e for e in await _audit(service, other_tenant) if e["resource_type"] == "secret"),
        key=lambda e: e["id"],
    )
    assert (put["actor"], put["details"]["actor_tenant"]) == ("ops", tenant)
    assert delete["action"] == "secret.delete"


@pytest.mark.parametrize("roles", [("member",), ("viewer",), ("auditor",), ()], ids=str)
async def test_only_tenant_admins_manage_secrets(
    service: Service, tenant: str, roles: tuple[str, ...], vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        await admin.put(_url(tenant, "TOKEN"), json={"value": "admins-value"})
    async with service.client(tenant, roles=roles) as client:
        responses = [
            await client.put(_url(tenant, "TOKEN"), json={"value": "replaced"}),
            await client.patch(_url(tenant, "TOKEN"), json={"usable_by": None}),
            await client.get(_url(tenant)),
            await client.delete(_url(tenant, "TOKEN")),
        ]

    for response in responses:
        assert assert_problem(response, 403, "forbidden")["permission"] == "secret:configure"
    assert await vault.value(tenant, "TOKEN") == "admins-value"


async def test_an_anonymous_caller_is_refused(service: Service, tenant: str) -> None:
    async with service.client() as anonymous:
        response = await anonymous.put(_url(tenant, "TOKEN"), json={"value": "x" * 8})
    assert_problem(response, 401, "unauthorized")


@pytest.mark.parametrize(
    "name",
    ["1TOKEN", "_TOKEN", "TOK-EN", "TOK.EN", "A" * 65, "TOKÉN", "TOK%20EN"],
    ids=["digit-first", "underscore-first", "dash", "dot", "too-long", "non-ascii", "space"],
)
async def test_a_malformed_name_is_refused_on_every_route(
    service: Service, tenant: str, name: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        put = await admin.put(_url(tenant, name), json={"value": "value"})
        delete = await admin.delete(_url(tenant, name))

    for response in (put, delete):
        assert_invalid(response, "path.name")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body.value"),
        ({"value": ""}, "body.value"),
        ({"value": 42}, "body.value"),
        ({"value": None}, "body.value"),
        ({"value": "x" * 16_385}, "body.value"),
        ({"value": "é" * 8_193}, "body.value"),  # 8,193 characters, 16,386 bytes
        ({"value": "nul\x00inside"}, "body.value"),
        ({"value": "ok", "name": "OTHER"}, "body.name"),
        ([], "body"),
    ],
    ids=[
        "missing",
        "empty",
        "number",
        "null",
        "too-long",
        "too-many-bytes",
        "nul",
        "extra",
        "list",
    ],
)
async def test_an_invalid_value_is_refused_with_its_field_and_not_echoed(
    service: Service, tenant: str, body: Any, field: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        response = await admin.put(_url(tenant, "TOKEN"), json=body)
        listed = await admin.get(_url(tenant))

    assert_invalid(response, field)
    value = body.get("value") if isinstance(body, dict) else None
    if isinstance(value, str) and len(value) > 16:
        assert value[:64] not in response.text
    assert listed.json()["items"] == []


async def test_a_value_of_exactly_the_largest_size_is_kept(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    value = "é" * 8_192  # 16 KiB in UTF-8
    async with service.client(tenant, roles=ADMIN) as admin:
        response = await admin.put(_url(tenant, "BIG"), json={"value": value})

    assert response.status_code == 201, response.text
    assert await vault.value(tenant, "BIG") == value


async def test_a_body_that_is_not_json_is_a_problem(
    service: Service, tenant: str, vault: SecretVault
) -> None:
    async with service.client(tenant, roles=ADMIN) as admin:
        response = await admin.put(
            _url(tenant, "TOKEN"),
            content=b'{"value": "unterminated',
            headers={"Content-Type": "application/json"},
        )
    assert_invalid(response, "body")


async def test_the_service_masks_every_value_it_holds_in_its_log_lines(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)  # configured before the service starts, as `omniforge serve` does
    logger = logging.getLogger("app.tools.builtin.web")
    set_here, set_elsewhere = "set-through-this-api-1f9", "set-by-another-instance-7c2"
    try:
        settings = service_settings(tmp_path, database_url, fake_llm)
        async with running_service(settings, fake_llm) as fresh:
            tenant = await fresh.create_tenant(f"t-{uuid4().hex[:12]}")
            async with fresh.client(tenant, roles=ADMIN) as admin:
                response = await admin.put(_url(tenant, "HERE"), json={"value": set_here})
            assert response.status_code == 201, response.text
            logger.warning("sending X-Api-Key: %s", set_here)
            # Another instance sets one; a run here opens it.
            elsewhere = SecretVault.from_settings(fresh.state.database, settings)
            sealed = elsewhere.seal(tenant, "ELSEWHERE", set_elsewhere)
            async with fresh.state.database.transaction() as connection:
                await SecretRepository(connection, tenant).put(
                    "ELSEWHERE", key_id=sealed.key_id, sealed=sealed.text, by="x", at=T0
                )
            vault = fresh.state.toolbox.secrets
            assert vault is not None
            await vault.resolver(tenant)
            try:
                raise ValueError(f"server said {set_elsewhere!r}")
            except ValueError:
                logger.exception("call failed")
        logger.warning("after shutdown: %s", set_here)  # the filter went with the service
    finally:
        root.removeHandler(handler)

    lines = out.getvalue()
    assert "app.tools.builtin.web sending X-Api-Key: [secret]" in lines
    assert "ValueError: server said '[secret]'" in lines
    assert f"after shutdown: {set_here}" in lines
    assert set_elsewhere not in lines
    assert lines.count(set_here) == 1
