"""Who may call what: every /api/v1 route refuses a missing or unusable bearer token with a
401 challenge, and answers another tenant's ids as if they did not exist."""

import base64
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import httpx
import jwt
import pytest

from app.security import mint_token
from tests.api.helpers import assert_problem, script_two_tool_task, stream, submit
from tests.api.tools import BUILTIN_TOOLS
from tests.service import JWT_SECRET, Service

SUBMISSION = {"input": "What is 17 * 23 + 4?"}


@dataclass(frozen=True)
class Route:
    method: str
    template: str

    def url(self, *, task_id: str, chain_id: str, tenant_id: str) -> str:
        # Agent routes name the built-in agent, which every tenant has.
        return self.template.format(
            task_id=task_id,
            chain_id=chain_id,
            tenant_id=tenant_id,
            name="default",
            version=1,
            conversation_id=uuid4(),
            file_id=uuid4(),
            server_id=uuid4(),
            remote_agent_id=uuid4(),
            key_id=uuid4(),
            approval_id=uuid4(),
            webhook_id=uuid4(),
            delivery_id=uuid4(),
            schedule_id=uuid4(),
        )

    def request_kwargs(self) -> dict[str, Any]:
        # A well-formed body, so the refusal can only be about the caller.
        form = FORMS.get(str(self))
        if form is not None:
            return {"files": form()}
        body = BODIES.get(str(self))
        return {} if body is None else {"json": body()}

    def __str__(self) -> str:
        return f"{self.method} {self.template}"


BODIES: dict[str, Callable[[], Any]] = {
    "POST /api/v1/tasks": lambda: SUBMISSION,
    "POST /v1/chat/completions": lambda: {
        "model": "agent:default",
        "messages": [{"role": "user", "content": "What is 17 * 23 + 4?"}],
    },
    "POST /api/v1/tenants": lambda: {"id": f"n-{uuid4().hex[:12]}", "name": "New tenant"},
    "PATCH /api/v1/tenants/{tenant_id}": lambda: {"name": "Renamed"},
    "PUT /api/v1/tenants/{tenant_id}/visibility": lambda: {"tool_types": {"llm": "full"}},
    "PUT /api/v1/tenants/{tenant_id}/tools": lambda: {"enabled_tools": BUILTIN_TOOLS},
    "PUT /api/v1/tenants/{tenant_id}/quotas": lambda: {"llm_calls_per_minute": 1000},
    "PUT /api/v1/tenants/{tenant_id}/network": lambda: {"allow": ["8.8.8.0/24"]},
    "PUT /api/v1/tenants/{tenant_id}/models": lambda: {"approved": None},
    "PUT /api/v1/tenants/{tenant_id}/approvals": lambda: {"tools": {"calculator": "never"}},
    "POST /api/v1/tasks/{task_id}/approvals/{approval_id}": lambda: {"decision": "approve"},
    "POST /api/v1/agents": lambda: {"name": f"a-{uuid4().hex[:12]}"},
    "PATCH /api/v1/agents/{name}": lambda: {"description": "Changed"},
    "POST /api/v1/conversations": dict,
    "PUT /api/v1/tenants/{tenant_id}/secrets/{name}": lambda: {"value": "s3cret-value"},
    "PATCH /api/v1/tenants/{tenant_id}/secrets/{name}": lambda: {"usable_by": None},
    "POST /api/v1/tenants/{tenant_id}/mcp-servers": lambda: {
        "name": f"m-{uuid4().hex[:8]}",
        "url": "http://127.0.0.1:9/mcp",
    },
    "PATCH /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": lambda: {"allowed_tools": None},
    # A loopback card no allow-list of the test's tenants admits: its owner gets a 422.
    "POST /api/v1/tenants/{tenant_id}/remote-agents": lambda: {
        "name": f"r-{uuid4().hex[:8]}",
        "card_url": "http://127.0.0.1:9/.well-known/agent-card.json",
    },
    "PATCH /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}": lambda: {"enabled": False},
    # A public address written as one: no name to resolve.
    "POST /api/v1/tenants/{tenant_id}/webhooks": lambda: {
        "url": "https://93.184.215.14/hook",
        "events": ["task.completed"],
    },
    "PATCH /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}": lambda: {"enabled": False},
    "POST /api/v1/api-keys": lambda: {"name": "ci", "roles": ["viewer"]},
    # Once a year, on the offline model: the shared service's scheduler fires none of them.
    "POST /api/v1/schedules": lambda: {
        "name": "New year",
        "cron": "0 0 1 1 *",
        "task": {"input": "Happy new year?", "model": "demo"},
    },
    "PATCH /api/v1/schedules/{schedule_id}": lambda: {"name": "Renamed"},
    "PATCH /api/v1/files/{file_id}": lambda: {"visibility": "tenant"},
    "PUT /api/v1/tenants/{tenant_id}/retention": lambda: {"retention_days": 30},
    # Bodies the found task refuses (422): nothing is started.
    "POST /api/v1/tasks/{task_id}/replay": lambda: {"agent": "no-such-agent"},
    "POST /api/v1/tasks/{task_id}/fork": lambda: {"from_step": 99},
}
# Multipart bodies.
FORMS: dict[str, Callable[[], Any]] = {
    "POST /api/v1/files": lambda: {"file": ("notes.txt", b"Some notes.", "text/plain")},
}

ROUTES = [
    Route("POST", "/api/v1/tasks"),
    Route("GET", "/api/v1/tasks"),
    Route("GET", "/api/v1/tasks/{task_id}"),
    Route("POST", "/api/v1/tasks/{task_id}/cancel"),
    Route("POST", "/api/v1/tasks/{task_id}/replay"),
    Route("POST", "/api/v1/tasks/{task_id}/fork"),
    Route("GET", "/api/v1/tasks/{task_id}/events"),
    Route("POST", "/api/v1/tasks/{task_id}/stream-ticket"),
    Route("GET", "/api/v1/tasks/{task_id}/chain"),
    Route("GET", "/api/v1/tasks/{task_id}/costs"),
    Route("GET", "/api/v1/tasks/{task_id}/approvals"),
    Route("POST", "/api/v1/tasks/{task_id}/approvals/{approval_id}"),
    Route("GET", "/api/v1/approvals"),
    Route("GET", "/api/v1/chains/{chain_id}"),
    Route("GET", "/api/v1/chains/{chain_id}/steps"),
    Route("GET", "/api/v1/chains/{chain_id}/export"),
    Route("GET", "/api/v1/tenants/{tenant_id}/chains"),
    Route("POST", "/api/v1/tenants"),
    Route("GET", "/api/v1/tenants"),
    Route("GET", "/api/v1/tenants/{tenant_id}"),
    Route("PATCH", "/api/v1/tenants/{tenant_id}"),
    Route("GET", "/api/v1/tenants/{tenant_id}/visibility"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/visibility"),
    Route("GET", "/api/v1/tenants/{tenant_id}/tools"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/tools"),
    Route("GET", "/api/v1/tenants/{tenant_id}/network"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/network"),
    Route("GET", "/api/v1/tenants/{tenant_id}/quotas"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/quotas"),
    Route("GET", "/api/v1/tenants/{tenant_id}/models"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/models"),
    Route("GET", "/api/v1/tenants/{tenant_id}/approvals"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/approvals"),
    Route("GET", "/api/v1/tenants/{tenant_id}/audit"),
    Route("GET", "/api/v1/tenants/{tenant_id}/costs"),
    Route("GET", "/api/v1/tenants/{tenant_id}/usage"),
    Route("GET", "/api/v1/tools"),
    Route("GET", "/api/v1/models"),
    Route("POST", "/v1/chat/completions"),
    Route("GET", "/v1/models"),
    Route("POST", "/api/v1/agents"),
    Route("GET", "/api/v1/agents"),
    Route("GET", "/api/v1/agents/{name}"),
    Route("PATCH", "/api/v1/agents/{name}"),
    Route("DELETE", "/api/v1/agents/{name}"),
    Route("GET", "/api/v1/agents/{name}/versions"),
    Route("GET", "/api/v1/agents/{name}/versions/{version}"),
    Route("POST", "/api/v1/conversations"),
    Route("GET", "/api/v1/conversations"),
    Route("GET", "/api/v1/conversations/{conversation_id}"),
    Route("POST", "/api/v1/files"),
    Route("GET", "/api/v1/files"),
    Route("GET", "/api/v1/files/{file_id}"),
    Route("GET", "/api/v1/files/{file_id}/content"),
    Route("PATCH", "/api/v1/files/{file_id}"),
    Route("DELETE", "/api/v1/files/{file_id}"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/secrets/{name}"),
    Route("PATCH", "/api/v1/tenants/{tenant_id}/secrets/{name}"),
    Route("GET", "/api/v1/tenants/{tenant_id}/secrets"),
    Route("DELETE", "/api/v1/tenants/{tenant_id}/secrets/{name}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/mcp-servers"),
    Route("GET", "/api/v1/tenants/{tenant_id}/mcp-servers"),
    Route("GET", "/api/v1/tenants/{tenant_id}/mcp-servers/{server_id}"),
    Route("PATCH", "/api/v1/tenants/{tenant_id}/mcp-servers/{server_id}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/mcp-servers/{server_id}/refresh"),
    Route("DELETE", "/api/v1/tenants/{tenant_id}/mcp-servers/{server_id}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/remote-agents"),
    Route("GET", "/api/v1/tenants/{tenant_id}/remote-agents"),
    Route("GET", "/api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}"),
    Route("PATCH", "/api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}"),
    Route("DELETE", "/api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/webhooks"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhooks"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhooks/task-secret"),
    Route("POST", "/api/v1/tenants/{tenant_id}/webhooks/task-secret/rotate"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhooks/{webhook_id}"),
    Route("PATCH", "/api/v1/tenants/{tenant_id}/webhooks/{webhook_id}"),
    Route("DELETE", "/api/v1/tenants/{tenant_id}/webhooks/{webhook_id}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/rotate-secret"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/deliveries"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhook-deliveries"),
    Route("GET", "/api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}"),
    Route("POST", "/api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}/redeliver"),
    Route("POST", "/api/v1/api-keys"),
    Route("GET", "/api/v1/api-keys"),
    Route("GET", "/api/v1/api-keys/{key_id}"),
    Route("DELETE", "/api/v1/api-keys/{key_id}"),
    Route("GET", "/api/v1/me"),
    Route("POST", "/api/v1/schedules"),
    Route("GET", "/api/v1/schedules"),
    Route("GET", "/api/v1/schedules/{schedule_id}"),
    Route("PATCH", "/api/v1/schedules/{schedule_id}"),
    Route("POST", "/api/v1/schedules/{schedule_id}/pause"),
    Route("POST", "/api/v1/schedules/{schedule_id}/resume"),
    Route("DELETE", "/api/v1/schedules/{schedule_id}"),
    Route("GET", "/api/v1/schedules/{schedule_id}/tasks"),
    Route("GET", "/api/v1/tenants/{tenant_id}/retention"),
    Route("PUT", "/api/v1/tenants/{tenant_id}/retention"),
    Route("DELETE", "/api/v1/conversations/{conversation_id}"),
    # Last: it erases the task the routes above read.
    Route("DELETE", "/api/v1/tasks/{task_id}"),
]
PLATFORM_ONLY = {"POST /api/v1/tenants", "GET /api/v1/tenants", "PATCH /api/v1/tenants/{tenant_id}"}
# Routes that take an id, tried by a tenant admin (every permission within its own tenant).
# Agent routes name the built-in agent here, which every tenant has: tests/api/test_agents.py
# tries each of them with another tenant's own agent, tests/api/test_conversations.py the
# conversation routes with another tenant's conversation.
ROUTES_WITH_IDS = [
    route
    for route in ROUTES
    if "{" in route.template
    and str(route) not in PLATFORM_ONLY
    and "{name}" not in route.template
    and "{conversation_id}" not in route.template
    # Each tried with another tenant's own file / MCP server in their own tests.
    and "{file_id}" not in route.template
    and "{server_id}" not in route.template
    # Tried with another tenant's own remote agent in tests/api/test_remote_agents.py.
    and "{remote_agent_id}" not in route.template
    # Tried with another tenant's own endpoint and delivery in tests/api/test_webhooks.py.
    and "{webhook_id}" not in route.template
    and "{delivery_id}" not in route.template
    # Tried with another tenant's real approval in tests/api/test_approvals.py.
    and "{approval_id}" not in route.template
    # Tried with another tenant's own key in tests/api/test_api_keys.py.
    and "{key_id}" not in route.template
    # Tried with another tenant's own schedule in tests/api/test_schedules.py.
    and "{schedule_id}" not in route.template
]
ADMIN = ("tenant_admin",)


def _claims(tenant: str, **overrides: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": "alice",
        "tenant_id": tenant,
        "roles": ["member"],
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(minutes=10),
    }
    claims.update(overrides)
    return {name: value for name, value in claims.items() if value is not None}


def _no_header(tenant: str) -> str | None:
    return None


def _basic_scheme(tenant: str) -> str:
    # Even a valid token is refused under another scheme.
    return "Basic " + base64.b64encode(b"alice:" + mint_for(tenant).encode()).decode()


def _expired(tenant: str) -> str:
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    return "Bearer " + mint_token(
        JWT_SECRET,
        tenant_id=tenant,
        subject="alice",
        roles=["member"],
        ttl=timedelta(hours=1),
        now=long_ago,
    )


def _other_secret(tenant: str) -> str:
    return "Bearer " + mint_token(
        "another-secret-" + "y" * 40, tenant_id=tenant, subject="alice", roles=["member"]
    )


def _malformed(tenant: str) -> str:
    return "Bearer not-a-jwt"


def _alg_none(tenant: str) -> str:
    return "Bearer " + jwt.encode(_claims(tenant), "", algorithm="none")


def _without_tenant(tenant: str) -> str:
    return "Bearer " + jwt.encode(_claims(tenant, tenant_id=None), JWT_SECRET, algorithm="HS256")


def _not_yet_valid(tenant: str) -> str:
    later = datetime.now(UTC) + timedelta(hours=1)  # far beyond the 30 s leeway
    claims = _claims(tenant, nbf=later, exp=later + timedelta(hours=1))
    return "Bearer " + jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def mint_for(tenant: str) -> str:
    return mint_token(JWT_SECRET, tenant_id=tenant, subject="alice", roles=["member"])


# (name, builder, whether a token was sent: RFC 6750 adds an error code only then)
BAD_CREDENTIALS: list[tuple[str, Callable[[str], str | None], bool]] = [
    ("no-authorization-header", _no_header, False),
    ("basic-scheme", _basic_scheme, False),
    ("expired-token", _expired, True),
    ("signed-with-another-secret", _other_secret, True),
    ("malformed-token", _malformed, True),
    ("alg-none-token", _alg_none, True),
    ("token-without-tenant-id", _without_tenant, True),
    ("token-not-valid-yet", _not_yet_valid, True),
]


@pytest.mark.parametrize(
    ("authorization", "token_given"),
    [(builder, given) for _, builder, given in BAD_CREDENTIALS],
    ids=[name for name, _, _ in BAD_CREDENTIALS],
)
async def test_every_route_refuses_unusable_credentials_with_a_bearer_challenge(
    service: Service,
    tenant: str,
    authorization: Callable[[str], str | None],
    token_given: bool,
) -> None:
    """Every documented route (test_openapi holds ROUTES to the document), one request each;
    the routes that answer otherwise are named together."""
    assert await _not_refused(service, tenant, ROUTES, authorization, token_given) == {}


async def _not_refused(
    service: Service,
    tenant: str,
    routes: list[Route],
    authorization: Callable[[str], str | None],
    token_given: bool,
) -> dict[str, str]:
    """The routes among `routes` that do not refuse the credentials as they should, and how
    they answered instead."""
    header = authorization(tenant)
    headers = {} if header is None else {"Authorization": header}
    wrong: dict[str, str] = {}
    async with service.client() as client:
        for route in routes:
            url = route.url(task_id=str(uuid4()), chain_id=str(uuid4()), tenant_id=tenant)
            response = await client.request(
                route.method, url, headers=headers, **route.request_kwargs()
            )
            try:
                _assert_bearer_challenge(response, header, token_given)
            except (AssertionError, KeyError) as exc:
                wrong[str(route)] = f"{response.status_code}: {exc!r}"
    return wrong


def _assert_bearer_challenge(
    response: httpx.Response, header: str | None, token_given: bool
) -> None:
    assert_problem(response, 401, "unauthorized")
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer")
    assert ('error="invalid_token"' in challenge) is token_given
    if header is not None:
        assert header.split()[-1] not in response.text  # the credentials are not echoed


@pytest.mark.parametrize(
    "body", [b"{not json", b'{"neither": "input nor messages"}'], ids=["not-json", "invalid"]
)
async def test_credentials_are_checked_before_the_request_is_validated(
    service: Service, body: bytes
) -> None:
    """A caller without a valid token learns nothing, not even what a valid body is."""
    async with service.client() as client:
        response = await client.post(
            "/api/v1/tasks", content=body, headers={"Content-Type": "application/json"}
        )
    assert_problem(response, 401, "unauthorized")


async def _finished_task(service: Service, tenant: str) -> dict[str, Any]:
    """A completed two-tool task of `tenant`, as its submission was accepted."""
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        accepted = await submit(client)
        await stream(client, accepted["task_id"])
    return accepted


@pytest.mark.parametrize("route", ROUTES_WITH_IDS, ids=str)
async def test_another_tenants_ids_are_not_found_and_nothing_of_theirs_leaks(
    service: Service, tenant: str, other_tenant: str, route: Route
) -> None:
    theirs = await _finished_task(service, other_tenant)
    ids = {"task_id": theirs["task_id"], "chain_id": theirs["chain_id"]}
    url = route.url(**ids, tenant_id=other_tenant)
    # The same user name in another tenant is another caller.
    async with service.client(tenant, sub="alice", roles=ADMIN) as client:
        response = await client.request(route.method, url, **route.request_kwargs())

    assert_problem(response, 404, "not-found")
    leaks = {*ids.values(), other_tenant, "395", "17 * 23", "calculator", "Asia/Tokyo"}
    for secret in leaks - {part for part in leaks if part in url}:
        assert secret not in response.text


# What the owner gets for the same request: the task has finished, so cancelling it is a
# conflict, which still shows the task was found.
OWNER_STATUS = {
    "POST /api/v1/tasks/{task_id}/cancel": 409,
    "POST /api/v1/tasks/{task_id}/replay": 422,
    "POST /api/v1/tasks/{task_id}/fork": 422,
    "POST /api/v1/tenants/{tenant_id}/mcp-servers": 201,
    "POST /api/v1/tenants/{tenant_id}/remote-agents": 422,
    "POST /api/v1/tenants/{tenant_id}/webhooks": 201,
    "DELETE /api/v1/tasks/{task_id}": 204,
}


@pytest.mark.parametrize("route", ROUTES_WITH_IDS, ids=str)
async def test_the_owner_reaches_the_same_resource(
    service: Service, other_tenant: str, route: Route
) -> None:
    theirs = await _finished_task(service, other_tenant)
    url = route.url(task_id=theirs["task_id"], chain_id=theirs["chain_id"], tenant_id=other_tenant)
    async with service.client(other_tenant, sub="alice", roles=ADMIN) as client:
        response = await client.request(route.method, url, **route.request_kwargs())

    expected = OWNER_STATUS.get(str(route), 200)
    assert response.status_code == expected, response.text
    if expected == 409:
        assert_problem(response, 409, "task-finished")
    elif expected == 204:  # erased: nothing to show
        assert response.content == b""
    elif expected == 422:  # found, its body refused: the other tenant got 404
        assert_problem(response, 422, "validation-error")
    elif "/tenants/{tenant_id}" in route.template and not route.template.endswith("/chains"):
        assert response.headers["content-type"] == "application/json"
    else:
        # The owner sees what the other tenant did not (the chain's steps hold the answer).
        theirs_only = (theirs["task_id"], theirs["chain_id"], "395")
        assert any(part in response.text for part in theirs_only), response.text


async def test_the_task_list_shows_only_the_callers_tenant(
    service: Service, tenant: str, other_tenant: str
) -> None:
    theirs = await _finished_task(service, other_tenant)
    async with service.client(tenant) as client:
        mine = await client.get("/api/v1/tasks")
    async with service.client(other_tenant) as client:
        owners = await client.get("/api/v1/tasks")

    assert mine.status_code == 200
    assert mine.json() == {"items": [], "next_cursor": None}
    assert [task["id"] for task in owners.json()["items"]] == [theirs["task_id"]]


# The A2A routes: each agent of a tenant served as an A2A agent. Not in the OpenAPI document
# (the agent card describes them), so not in ROUTES, whose tables follow that document; the
# same checks run on them here and in tests/api/test_rbac.py, the A2A answers themselves in
# tests/api/test_a2a_server.py.
A2A_BASE = "/a2a/v1/tenants/{tenant_id}/agents/{name}"
A2A_ROUTES = [
    Route("GET", A2A_BASE + "/.well-known/agent-card.json"),
    Route("POST", A2A_BASE),
    Route("POST", A2A_BASE + "/message:send"),
    Route("POST", A2A_BASE + "/message:stream"),
    Route("GET", A2A_BASE + "/tasks"),
    Route("GET", A2A_BASE + "/tasks/{task_id}"),
    Route("POST", A2A_BASE + "/tasks/{task_id}:cancel"),
    Route("GET", A2A_BASE + "/tasks/{task_id}:subscribe"),
    Route("POST", A2A_BASE + "/tasks/{task_id}:subscribe"),
]
A2A_MESSAGE = {
    "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "What is 17 * 23 + 4?"}],
    }
}
BODIES.update(
    {
        # The JSON-RPC binding: one route, each method with its permission (reading here).
        f"POST {A2A_BASE}": lambda: {"jsonrpc": "2.0", "id": 1, "method": "ListTasks"},
        f"POST {A2A_BASE}/message:send": lambda: A2A_MESSAGE,
        f"POST {A2A_BASE}/message:stream": lambda: A2A_MESSAGE,
    }
)


@pytest.mark.parametrize(
    ("authorization", "token_given"),
    [(builder, given) for _, builder, given in BAD_CREDENTIALS],
    ids=[name for name, _, _ in BAD_CREDENTIALS],
)
async def test_every_a2a_route_refuses_unusable_credentials_with_a_bearer_challenge(
    service: Service,
    tenant: str,
    authorization: Callable[[str], str | None],
    token_given: bool,
) -> None:
    assert await _not_refused(service, tenant, A2A_ROUTES, authorization, token_given) == {}


@pytest.mark.parametrize("route", A2A_ROUTES, ids=str)
async def test_an_a2a_route_naming_another_tenant_is_not_found_and_leaks_nothing(
    service: Service, tenant: str, other_tenant: str, route: Route
) -> None:
    await test_another_tenants_ids_are_not_found_and_nothing_of_theirs_leaks(
        service, tenant, other_tenant, route
    )
