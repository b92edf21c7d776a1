"""What a request may carry, checked in one place: text no database stores (U+0000, lone
surrogates) anywhere in a request is a 422 naming the field (401 in an identity claim); times,
cursors and ids out of range are refused or clamped; bodies are capped (413), must be UTF-8
JSON without NaN, and are judged after the caller's permission; sizes inside a task are
bounded. None of it may answer 500."""

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from fastapi import FastAPI

from app.api import create_app
from app.api.serving import serve_locally
from app.runs.models import MAX_INPUT_CHARS, MAX_METADATA_BYTES, MAX_METADATA_DEPTH
from tests.api.helpers import (
    PROBLEM,
    assert_invalid,
    assert_no_internals,
    assert_problem,
    stream,
    submit,
)
from tests.api.tools import TEST_TOOLS
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import JWT_SECRET, MODEL, Service, running_service, service_settings

NUL = "\x00"
ZERO = "00000000-0000-0000-0000-000000000000"
SURROGATE = "\ud800"
ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
PLATFORM = {"sub": "ops", "roles": ("platform_admin",)}


def _cursor(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _nested(depth: int) -> Any:
    return {"a": _nested(depth - 1)} if depth else 1


def _json(value: Any) -> dict[str, Any]:
    """A JSON body as the client writes it, lone surrogates escaped as JSON allows."""
    return {
        "content": json.dumps(value).encode(),
        "headers": {"Content-Type": "application/json"},
    }


# (case id, who, method, path ({t}: the tenant), request kwargs, the field named)
UNSTORABLE: list[tuple[str, dict[str, Any], str, str, dict[str, Any], str]] = [
    ("task-input-nul", {}, "POST", "/api/v1/tasks", _json({"input": f"a{NUL}b"}), "body.input"),
    (
        "task-input-surrogate",
        {},
        "POST",
        "/api/v1/tasks",
        _json({"input": f"a{SURROGATE}b"}),
        "body.input",
    ),
    (
        "message-content",
        {},
        "POST",
        "/api/v1/tasks",
        _json({"messages": [{"role": "user", "content": NUL}]}),
        "body.messages.0.content",
    ),
    (
        "message-extra-field",
        {},
        "POST",
        "/api/v1/tasks",
        _json({"messages": [{"role": "user", "content": "hi", "name": SURROGATE}]}),
        "body.messages.0.name",
    ),
    (
        "metadata-key",
        {},
        "POST",
        "/api/v1/tasks",
        _json({"input": "hi", "metadata": {f"k{NUL}": 1}}),
        "body.metadata",
    ),
    (
        "metadata-value",
        {},
        "POST",
        "/api/v1/tasks",
        _json({"input": "hi", "metadata": {"k": [f"v{SURROGATE}"]}}),
        "body.metadata.k.0",
    ),
    (
        "tenant-name",
        PLATFORM,
        "POST",
        "/api/v1/tenants",
        _json({"id": "fresh-tenant", "name": f"Acme{NUL}"}),
        "body.name",
    ),
    (
        "tenant-rename",
        PLATFORM,
        "PATCH",
        "/api/v1/tenants/{t}",
        _json({"name": f"Acme{SURROGATE}"}),
        "body.name",
    ),
    ("tenant-id-in-path", ADMIN, "GET", "/api/v1/tenants/{t}%00", {}, "path.tenant_id"),
    (
        "visibility-tool-name",
        ADMIN,
        "PUT",
        "/api/v1/tenants/{t}/visibility",
        _json({"tools": {f"calc{NUL}": "hidden"}}),
        "body.tools",
    ),
    (
        "visibility-sensitive-field",
        ADMIN,
        "PUT",
        "/api/v1/tenants/{t}/visibility",
        _json({"sensitive_fields": [f"pass{SURROGATE}"]}),
        "body.sensitive_fields.0",
    ),
    ("audit-actor", ADMIN, "GET", "/api/v1/tenants/{t}/audit?actor=al%00ice", {}, "query.actor"),
    ("audit-action", ADMIN, "GET", "/api/v1/tenants/{t}/audit?action=%00", {}, "query.action"),
    (
        "audit-resource",
        ADMIN,
        "GET",
        "/api/v1/tenants/{t}/audit?resource_id=x%00",
        {},
        "query.resource_id",
    ),
    ("chains-agent", {}, "GET", "/api/v1/tenants/{t}/chains?agent=re%00act", {}, "query.agent"),
    ("query-name", {}, "GET", "/api/v1/tasks?li%00mit=3", {}, "query"),
    (
        "tenant-cursor",
        PLATFORM,
        "GET",
        f"/api/v1/tenants?cursor={_cursor(b'acme' + bytes([0]))}",
        {},
        "query.cursor",
    ),
    (
        "task-cursor",
        {},
        "GET",
        f"/api/v1/tasks?cursor={_cursor(['2026-01-01T00:00:00+00:00', NUL])}",
        {},
        "query.cursor",
    ),
]


@pytest.mark.parametrize(
    ("who", "method", "path", "kwargs", "field"),
    [case[1:] for case in UNSTORABLE],
    ids=[case[0] for case in UNSTORABLE],
)
async def test_text_no_database_stores_is_a_validation_problem_naming_its_field(
    service: Service,
    tenant: str,
    who: dict[str, Any],
    method: str,
    path: str,
    kwargs: dict[str, Any],
    field: str,
) -> None:
    async with service.client(tenant, **who) as client:
        response = await client.request(method, path.format(t=tenant), **kwargs)
    body = assert_invalid(response, field)
    assert "U+" in json.dumps(body) or "cursor" in json.dumps(body)


@pytest.mark.parametrize("claim", ["sub", "tenant_id"])
async def test_a_token_whose_identity_holds_a_nul_is_unauthorized(
    service: Service, tenant: str, claim: str
) -> None:
    claims = {"sub": "mallory", "tenant_id": tenant, "roles": ["member"], "exp": 2**40}
    claims[claim] = f"{claims[claim]}{NUL}"
    token = jwt.encode(claims, JWT_SECRET, algorithm="HS256")
    async with httpx.AsyncClient(base_url=service.base_url) as client:
        response = await client.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"})
    body = assert_problem(response, 401, "unauthorized")
    assert body["detail"] == f"the token's `{claim}` claim holds control characters"


async def test_a_megabyte_token_is_unauthorized_before_it_is_parsed(
    service: Service, tenant: str
) -> None:
    async with httpx.AsyncClient(base_url=service.base_url) as client:
        response = await client.get(
            "/api/v1/tasks", headers={"Authorization": "Bearer " + "a" * 1_000_000}
        )
    body = assert_problem(response, 401, "unauthorized")
    assert "longer than 8192 bytes" in body["detail"]


# An extreme time with an offset: its UTC time is before year 1 or after year 9999.
YEAR_1 = "0001-01-01T00:00:00+14:00"
YEAR_9999 = "9999-12-31T23:59:59-14:00"


@pytest.mark.parametrize(
    ("who", "path", "field"),
    [
        (
            {},
            f"/api/v1/tasks?cursor={_cursor([YEAR_1, ZERO])}",
            "query.cursor",
        ),
        (
            {},
            f"/api/v1/tasks?cursor={_cursor([YEAR_9999, ZERO])}",
            "query.cursor",
        ),
        (
            {},
            f"/api/v1/tenants/{{t}}/chains?cursor={_cursor(['1969-12-31T23:59:59Z', ZERO])}",
            "query.cursor",
        ),
        ({}, f"/api/v1/tasks?cursor={_cursor([1.5, 7])}", "query.cursor"),
        (
            ADMIN,
            f"/api/v1/tenants/{{t}}/audit?cursor={_cursor(b'9223372036854775808')}",
            "query.cursor",
        ),
        (ADMIN, f"/api/v1/tenants/{{t}}/audit?cursor={_cursor(b'9' * 5000)}", "query.cursor"),
        ({}, "/api/v1/tenants/{t}/chains?from=0.5", "query.from"),
        (ADMIN, "/api/v1/tenants/{t}/costs?from=1700000000", "query.from"),
        (ADMIN, "/api/v1/tenants/{t}/usage?to=17", "query.to"),
        (ADMIN, "/api/v1/tenants/{t}/costs?from=0001-01-01&to=0001-01-05", "query.from"),
    ],
)
async def test_a_time_or_cursor_out_of_range_is_a_validation_problem(
    service: Service, tenant: str, who: dict[str, Any], path: str, field: str
) -> None:
    async with service.client(tenant, **who) as client:
        response = await client.get(path.format(t=tenant))
    assert_invalid(response, field)


@pytest.mark.parametrize(
    ("who", "path"),
    [
        ({}, f"/api/v1/tenants/{{t}}/chains?from={YEAR_1}&to={YEAR_9999}"),
        ({}, "/api/v1/tenants/{t}/chains?from=0001-01-01&to=9999-12-31"),
        (ADMIN, f"/api/v1/tenants/{{t}}/audit?from={YEAR_1}&to={YEAR_9999}"),
        (ADMIN, f"/api/v1/tenants/{{t}}/costs?to={YEAR_9999}"),
        (ADMIN, f"/api/v1/tenants/{{t}}/costs?to={YEAR_1}"),
        (ADMIN, "/api/v1/tenants/{t}/usage?to=0001-01-01"),
        (ADMIN, "/api/v1/tenants/{t}/usage?to=9999-12-31"),
    ],
)
async def test_a_time_at_the_ends_of_the_calendar_is_clamped(
    service: Service, tenant: str, who: dict[str, Any], path: str
) -> None:
    async with service.client(tenant, **who) as client:
        response = await client.get(path.replace("+", "%2B").format(t=tenant))
    assert response.status_code == 200, response.text


async def test_a_last_event_id_of_thousands_of_digits_is_a_validation_problem(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("ok"))
    async with service.client(tenant) as client:
        task = await submit(client)
        await stream(client, task["task_id"])
        response = await client.get(
            f"/api/v1/tasks/{task['task_id']}/events", headers={"Last-Event-ID": "9" * 5000}
        )
    assert_invalid(response, "header.Last-Event-ID")


# Bodies: parsed strictly, judged after the caller's permission.
UNPARSABLE: list[tuple[str, bytes, str]] = [
    ("not-utf-8", b'{"submissions_per_minute": "\xff\xfe"}', "not UTF-8"),
    ("not-json", b'{"submissions_per_minute": ', "not JSON"),
    ("nan", b'{"submissions_per_minute": NaN}', "NaN is not a JSON number"),
    ("infinity", b'{"default_budget": {"max_cost_usd": Infinity}}', "Infinity"),
    ("nested-256", b'{"x": ' + b"[" * 256 + b"]" * 256 + b"}", "nested deeper than 32"),
    ("nested-100k", b"[" * 100_000 + b"]" * 100_000, "nested deeper than 32"),
]


@pytest.mark.parametrize(
    ("body", "reason"), [case[1:] for case in UNPARSABLE], ids=[case[0] for case in UNPARSABLE]
)
async def test_an_unparsable_body_is_a_validation_problem_after_the_permission_check(
    service: Service, tenant: str, body: bytes, reason: str
) -> None:
    path = f"/api/v1/tenants/{tenant}/quotas"
    headers = {"Content-Type": "application/json"}
    async with service.client(tenant) as member, service.client(tenant, **ADMIN) as admin:
        as_member = await member.put(path, content=body, headers=headers)
        as_admin = await admin.put(path, content=body, headers=headers)
    assert_problem(as_member, 403, "forbidden")
    problem = assert_invalid(as_admin, "body")
    assert reason in problem["errors"][0]["message"]


async def test_nan_in_task_metadata_is_refused_not_turned_into_null(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.post(
            "/api/v1/tasks",
            content=b'{"input": "hi", "metadata": {"score": NaN}}',
            headers={"Content-Type": "application/json"},
        )
    assert_invalid(response, "body")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/tasks", b'{"input": "hi", "metadata": {"score": 1e400}}', "body.metadata.score"),
        ("/api/v1/tasks", b'{"input": "hi", "metadata": {"s": [1, -2E+999]}}', "body.metadata.s.1"),
        (
            "/api/v1/agents",
            b'{"name": "a", "response_format": {"maximum": 1e309}}',
            "body.response_format.maximum",
        ),
    ],
)
async def test_a_number_too_large_for_a_double_is_refused_not_turned_into_null(
    service: Service, tenant: str, path: str, body: bytes, field: str
) -> None:
    async with service.client(tenant, **ADMIN) as client:
        response = await client.post(
            path, content=body, headers={"Content-Type": "application/json"}
        )
        tasks = (await client.get("/api/v1/tasks")).json()["items"]
    problem = assert_invalid(response, field)
    assert "too large" in problem["errors"][0]["message"]
    assert tasks == []


async def test_a_body_over_the_cap_is_refused_with_413_declared_or_streamed(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    cap = 16_384
    settings = service_settings(service_dir, database_url, fake_llm, max_body_bytes=cap)
    # Far larger than the cap and than socket buffers: refused without losing the answer.
    body = json.dumps({"input": "x" * (cap * 64)}).encode()

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    async with running_service(settings, fake_llm) as service:
        tenant = await service.create_tenant("capped")
        async with service.client(tenant) as client:
            declared = await client.post(
                "/api/v1/tasks", content=body, headers={"Content-Type": "application/json"}
            )
            streamed = await client.post(
                "/api/v1/tasks", content=chunks(), headers={"Content-Type": "application/json"}
            )
            # The refused bodies were read to their end: the connection still serves.
            after = await client.get("/api/v1/tasks")
    for response in (declared, streamed):
        problem = assert_problem(response, 413, "payload-too-large")
        assert str(cap) in problem["detail"]
    assert after.status_code == 200


@pytest.mark.parametrize(
    ("submission", "field"),
    [
        ({"input": "hi", "metadata": {"k": "v" * MAX_METADATA_BYTES}}, "body.metadata"),
        ({"input": "hi", "metadata": _nested(MAX_METADATA_DEPTH + 1)}, "body.metadata"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x" * (MAX_INPUT_CHARS // 2)},
                    {"role": "user", "content": "y" * (MAX_INPUT_CHARS // 2 + 1)},
                ]
            },
            "body.messages",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x" * (MAX_INPUT_CHARS - 10)},
                    {"role": "assistant", "content": None, "tool_calls": ["y" * 100]},
                ]
            },
            "body.messages",
        ),
        ({"input": "x" * (MAX_INPUT_CHARS + 1)}, "body.input"),
    ],
    ids=["metadata-size", "metadata-depth", "messages-total", "messages-extra-fields", "input"],
)
async def test_a_task_beyond_its_size_limits_is_a_validation_problem(
    service: Service, tenant: str, submission: dict[str, Any], field: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.post("/api/v1/tasks", json=submission)
    assert_invalid(response, field)


async def test_a_500_closes_its_connection_so_the_clients_next_request_succeeds(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    app: FastAPI = create_app(
        service_settings(service_dir, database_url, fake_llm), tools=TEST_TOOLS
    )

    async def broken() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/broken", broken)
    async with serve_locally(app) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        failed = await client.get("/broken")
        after = await client.get("/healthz")  # the same client, the next request
    assert failed.status_code == 500
    assert failed.headers["content-type"] == PROBLEM
    assert failed.headers["connection"] == "close"
    assert_no_internals(failed)
    assert after.status_code == 200
