"""Who may do what: every route × every role answers as the role's permissions say, a
refusal names the missing permission, and members cancel only their own tasks."""

from typing import Any

import pytest
from fastapi.routing import APIRoute

from app.api.a2a.router import router as a2a_router
from app.security.rbac import Permission, Role
from tests.api import test_auth
from tests.api.helpers import assert_problem, script_two_tool_task, stream, submit
from tests.api.test_auth import ROUTES
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

ROLES = [role.value for role in Role] + ["none"]
ALL = dict.fromkeys(ROLES, 200) | {"none": 403}
ADMINS = {"platform_admin": 200, "tenant_admin": 200}


def _only(allowed: dict[str, int]) -> dict[str, int]:
    return {role: allowed.get(role, 403) for role in ROLES}


# The status each role gets on its own tenant's resources (a finished task of another member).
EXPECTED: dict[str, dict[str, int]] = {
    "POST /api/v1/tasks": _only({"platform_admin": 202, "tenant_admin": 202, "member": 202}),
    "GET /api/v1/tasks": ALL,
    "GET /api/v1/tasks/{task_id}": ALL,
    # Finished: a permitted cancel is a conflict; a member may not cancel another's task.
    "POST /api/v1/tasks/{task_id}/cancel": _only({"platform_admin": 409, "tenant_admin": 409}),
    # Found, and the body refused (an unknown agent, a step past the chain's end).
    **dict.fromkeys(
        ["POST /api/v1/tasks/{task_id}/replay", "POST /api/v1/tasks/{task_id}/fork"],
        _only({"platform_admin": 422, "tenant_admin": 422, "member": 422}),
    ),
    "GET /api/v1/tasks/{task_id}/events": ALL,
    "POST /api/v1/tasks/{task_id}/stream-ticket": ALL,
    "GET /api/v1/tasks/{task_id}/chain": ALL,
    "GET /api/v1/tasks/{task_id}/costs": _only(ADMINS | {"auditor": 200}),
    "GET /api/v1/tasks/{task_id}/approvals": ALL,
    # No such approval: whoever reads tasks learns only that (deciding is checked on a real
    # one in tests/api/test_approvals.py).
    "POST /api/v1/tasks/{task_id}/approvals/{approval_id}": dict.fromkeys(ROLES, 404)
    | {"none": 403},
    "GET /api/v1/approvals": ALL,
    "GET /api/v1/chains/{chain_id}": ALL,
    "GET /api/v1/chains/{chain_id}/steps": ALL,
    "GET /api/v1/chains/{chain_id}/export": _only(ADMINS | {"member": 200, "auditor": 200}),
    "GET /api/v1/tenants/{tenant_id}/chains": ALL,
    "POST /api/v1/tenants": _only({"platform_admin": 201}),
    "GET /api/v1/tenants": _only({"platform_admin": 200}),
    "GET /api/v1/tenants/{tenant_id}": _only(ADMINS),
    "PATCH /api/v1/tenants/{tenant_id}": _only({"platform_admin": 200}),
    "GET /api/v1/tenants/{tenant_id}/visibility": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/visibility": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/tools": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/tools": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/network": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/network": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/quotas": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/quotas": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/models": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/models": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/approvals": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/approvals": _only(ADMINS),
    "GET /api/v1/tenants/{tenant_id}/audit": _only(ADMINS | {"auditor": 200}),
    "GET /api/v1/tenants/{tenant_id}/costs": _only(ADMINS | {"auditor": 200}),
    "GET /api/v1/tenants/{tenant_id}/usage": _only(ADMINS | {"auditor": 200}),
    "GET /api/v1/tenants/{tenant_id}/retention": _only(ADMINS),
    "PUT /api/v1/tenants/{tenant_id}/retention": _only(ADMINS),
    # Erasures (the task last of all routes): a conversation nobody started is not there.
    "DELETE /api/v1/tasks/{task_id}": _only({"platform_admin": 204, "tenant_admin": 204}),
    "DELETE /api/v1/conversations/{conversation_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "GET /api/v1/tools": dict.fromkeys(ROLES, 200),
    "GET /api/v1/models": dict.fromkeys(ROLES, 200),
    # The OpenAI-compatible endpoint: a completion runs the built-in agent to its answer.
    "POST /v1/chat/completions": _only({"platform_admin": 200, "tenant_admin": 200, "member": 200}),
    "GET /v1/models": ALL,
    # Agent routes name the built-in agent: readable by all who read tasks, never changed.
    "POST /api/v1/agents": _only({"platform_admin": 201, "tenant_admin": 201}),
    "GET /api/v1/agents": ALL,
    "GET /api/v1/agents/{name}": ALL,
    "PATCH /api/v1/agents/{name}": _only({"platform_admin": 409, "tenant_admin": 409}),
    "DELETE /api/v1/agents/{name}": _only({"platform_admin": 409, "tenant_admin": 409}),
    "GET /api/v1/agents/{name}/versions": ALL,
    "GET /api/v1/agents/{name}/versions/{version}": ALL,
    "POST /api/v1/conversations": _only(
        {"platform_admin": 201, "tenant_admin": 201, "member": 201}
    ),
    "GET /api/v1/conversations": ALL,
    # A conversation nobody started: permitted readers are told it is not there.
    "GET /api/v1/conversations/{conversation_id}": dict.fromkeys(ROLES, 404) | {"none": 403},
    "POST /api/v1/files": _only({"platform_admin": 201, "tenant_admin": 201, "member": 201}),
    "GET /api/v1/files": ALL,
    # Files nobody uploaded: permitted readers are told they are not there.
    "GET /api/v1/files/{file_id}": dict.fromkeys(ROLES, 404) | {"none": 403},
    "GET /api/v1/files/{file_id}/content": dict.fromkeys(ROLES, 404) | {"none": 403},
    "PATCH /api/v1/files/{file_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404, "member": 404}
    ),
    "DELETE /api/v1/files/{file_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404, "member": 404}
    ),
    "PUT /api/v1/tenants/{tenant_id}/secrets/{name}": _only(
        {"platform_admin": 201, "tenant_admin": 201}
    ),
    "PATCH /api/v1/tenants/{tenant_id}/secrets/{name}": _only(
        {"platform_admin": 200, "tenant_admin": 200}
    ),
    "GET /api/v1/tenants/{tenant_id}/secrets": _only(ADMINS),
    "DELETE /api/v1/tenants/{tenant_id}/secrets/{name}": _only(
        {"platform_admin": 204, "tenant_admin": 204}
    ),
    "POST /api/v1/tenants/{tenant_id}/mcp-servers": _only(
        {"platform_admin": 201, "tenant_admin": 201}
    ),
    "GET /api/v1/tenants/{tenant_id}/mcp-servers": _only(ADMINS),
    # Servers nobody registered.
    "GET /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "PATCH /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "POST /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}/refresh": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "DELETE /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    # A card at a loopback address the tenant did not allow; agents nobody registered.
    "POST /api/v1/tenants/{tenant_id}/remote-agents": _only(
        {"platform_admin": 422, "tenant_admin": 422}
    ),
    "GET /api/v1/tenants/{tenant_id}/remote-agents": _only(ADMINS),
    **dict.fromkeys(
        [
            "GET /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
            "PATCH /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
            "DELETE /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
        ],
        _only({"platform_admin": 404, "tenant_admin": 404}),
    ),
    # Endpoints and deliveries nobody made (the permitted ones are 404).
    "POST /api/v1/tenants/{tenant_id}/webhooks": _only(
        {"platform_admin": 201, "tenant_admin": 201}
    ),
    "GET /api/v1/tenants/{tenant_id}/webhooks": _only({"platform_admin": 200, "tenant_admin": 200}),
    "GET /api/v1/tenants/{tenant_id}/webhooks/task-secret": _only(
        {"platform_admin": 200, "tenant_admin": 200}
    ),
    "POST /api/v1/tenants/{tenant_id}/webhooks/task-secret/rotate": _only(
        {"platform_admin": 200, "tenant_admin": 200}
    ),
    "GET /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "PATCH /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "DELETE /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "POST /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/rotate-secret": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "GET /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/deliveries": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "GET /api/v1/tenants/{tenant_id}/webhook-deliveries": _only(
        {"platform_admin": 200, "tenant_admin": 200}
    ),
    "GET /api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "POST /api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}/redeliver": _only(
        {"platform_admin": 404, "tenant_admin": 404}
    ),
    "POST /api/v1/api-keys": _only({"platform_admin": 201, "tenant_admin": 201}),
    "GET /api/v1/api-keys": _only(ADMINS),
    # Keys nobody created.
    "GET /api/v1/api-keys/{key_id}": _only({"platform_admin": 404, "tenant_admin": 404}),
    "DELETE /api/v1/api-keys/{key_id}": _only({"platform_admin": 404, "tenant_admin": 404}),
    # Who the caller is: anyone signed in, with or without roles.
    "GET /api/v1/me": dict.fromkeys(ROLES, 200),
    "POST /api/v1/schedules": _only({"platform_admin": 201, "tenant_admin": 201, "member": 201}),
    "GET /api/v1/schedules": _only(ADMINS | {"member": 200, "viewer": 200, "auditor": 200}),
    # Schedules nobody made (the permitted ones are 404).
    **dict.fromkeys(
        [
            "PATCH /api/v1/schedules/{schedule_id}",
            "POST /api/v1/schedules/{schedule_id}/pause",
            "POST /api/v1/schedules/{schedule_id}/resume",
            "DELETE /api/v1/schedules/{schedule_id}",
        ],
        _only({"platform_admin": 404, "tenant_admin": 404, "member": 404}),
    ),
    **dict.fromkeys(
        ["GET /api/v1/schedules/{schedule_id}", "GET /api/v1/schedules/{schedule_id}/tasks"],
        _only({"platform_admin": 404, "tenant_admin": 404, "member": 404, "viewer": 404})
        | {"auditor": 404},
    ),
}

# What a refusal names.
NEEDS: dict[str, str] = {
    "POST /api/v1/tasks": Permission.TASK_CREATE,
    "GET /api/v1/tasks": Permission.TASK_READ,
    "GET /api/v1/tasks/{task_id}": Permission.TASK_READ,
    "POST /api/v1/tasks/{task_id}/cancel": Permission.TASK_CANCEL,
    "POST /api/v1/tasks/{task_id}/replay": Permission.TASK_CREATE,
    "POST /api/v1/tasks/{task_id}/fork": Permission.TASK_CREATE,
    "GET /api/v1/tasks/{task_id}/events": Permission.CHAIN_READ,
    "POST /api/v1/tasks/{task_id}/stream-ticket": Permission.CHAIN_READ,
    "GET /api/v1/tasks/{task_id}/chain": Permission.CHAIN_READ,
    "GET /api/v1/tasks/{task_id}/costs": Permission.COST_VIEW,
    "GET /api/v1/tasks/{task_id}/approvals": Permission.TASK_READ,
    "POST /api/v1/tasks/{task_id}/approvals/{approval_id}": Permission.TASK_READ,
    "GET /api/v1/approvals": Permission.TASK_READ,
    "GET /api/v1/chains/{chain_id}": Permission.CHAIN_READ,
    "GET /api/v1/chains/{chain_id}/steps": Permission.CHAIN_READ,
    "GET /api/v1/chains/{chain_id}/export": Permission.CHAIN_EXPORT,
    "GET /api/v1/tenants/{tenant_id}/chains": Permission.CHAIN_READ,
    "POST /api/v1/tenants": Permission.TENANT_MANAGE,
    "GET /api/v1/tenants": Permission.TENANT_MANAGE,
    "GET /api/v1/tenants/{tenant_id}": Permission.TENANT_MANAGE,
    "PATCH /api/v1/tenants/{tenant_id}": Permission.TENANT_MANAGE,
    "GET /api/v1/tenants/{tenant_id}/visibility": Permission.TOOL_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/visibility": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/tools": Permission.TOOL_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/tools": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/network": Permission.TOOL_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/network": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/quotas": Permission.RATE_LIMIT_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/quotas": Permission.RATE_LIMIT_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/models": Permission.COST_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/models": Permission.COST_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/approvals": Permission.TOOL_CONFIGURE,
    "PUT /api/v1/tenants/{tenant_id}/approvals": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/audit": Permission.AUDIT_READ,
    "GET /api/v1/tenants/{tenant_id}/costs": Permission.COST_VIEW,
    "GET /api/v1/tenants/{tenant_id}/usage": Permission.COST_VIEW,
    "GET /api/v1/tenants/{tenant_id}/retention": Permission.TENANT_MANAGE,
    "PUT /api/v1/tenants/{tenant_id}/retention": Permission.TENANT_MANAGE,
    "DELETE /api/v1/tasks/{task_id}": Permission.TASK_DELETE,
    "DELETE /api/v1/conversations/{conversation_id}": Permission.TASK_DELETE,
    "POST /v1/chat/completions": Permission.TASK_CREATE,
    "GET /v1/models": Permission.TASK_READ,
    "POST /api/v1/agents": Permission.AGENT_CONFIGURE,
    "GET /api/v1/agents": Permission.TASK_READ,
    "GET /api/v1/agents/{name}": Permission.TASK_READ,
    "PATCH /api/v1/agents/{name}": Permission.AGENT_CONFIGURE,
    "DELETE /api/v1/agents/{name}": Permission.AGENT_CONFIGURE,
    "GET /api/v1/agents/{name}/versions": Permission.TASK_READ,
    "GET /api/v1/agents/{name}/versions/{version}": Permission.TASK_READ,
    "POST /api/v1/conversations": Permission.TASK_CREATE,
    "GET /api/v1/conversations": Permission.TASK_READ,
    "GET /api/v1/conversations/{conversation_id}": Permission.TASK_READ,
    "POST /api/v1/files": Permission.FILE_WRITE,
    "GET /api/v1/files": Permission.FILE_READ,
    "GET /api/v1/files/{file_id}": Permission.FILE_READ,
    "GET /api/v1/files/{file_id}/content": Permission.FILE_READ,
    "PATCH /api/v1/files/{file_id}": Permission.FILE_WRITE,
    "DELETE /api/v1/files/{file_id}": Permission.FILE_WRITE,
    "PUT /api/v1/tenants/{tenant_id}/secrets/{name}": Permission.SECRET_CONFIGURE,
    "PATCH /api/v1/tenants/{tenant_id}/secrets/{name}": Permission.SECRET_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/secrets": Permission.SECRET_CONFIGURE,
    "DELETE /api/v1/tenants/{tenant_id}/secrets/{name}": Permission.SECRET_CONFIGURE,
    "POST /api/v1/tenants/{tenant_id}/mcp-servers": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/mcp-servers": Permission.TOOL_CONFIGURE,
    "GET /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": Permission.TOOL_CONFIGURE,
    "PATCH /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": Permission.TOOL_CONFIGURE,
    "POST /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}/refresh": Permission.TOOL_CONFIGURE,
    "DELETE /api/v1/tenants/{tenant_id}/mcp-servers/{server_id}": Permission.TOOL_CONFIGURE,
    **dict.fromkeys(
        [
            "POST /api/v1/tenants/{tenant_id}/remote-agents",
            "GET /api/v1/tenants/{tenant_id}/remote-agents",
            "GET /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
            "PATCH /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
            "DELETE /api/v1/tenants/{tenant_id}/remote-agents/{remote_agent_id}",
        ],
        Permission.TOOL_CONFIGURE,
    ),
    **dict.fromkeys(
        [
            "POST /api/v1/tenants/{tenant_id}/webhooks",
            "GET /api/v1/tenants/{tenant_id}/webhooks",
            "GET /api/v1/tenants/{tenant_id}/webhooks/task-secret",
            "POST /api/v1/tenants/{tenant_id}/webhooks/task-secret/rotate",
            "GET /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}",
            "PATCH /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}",
            "DELETE /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}",
            "POST /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/rotate-secret",
            "GET /api/v1/tenants/{tenant_id}/webhooks/{webhook_id}/deliveries",
            "GET /api/v1/tenants/{tenant_id}/webhook-deliveries",
            "GET /api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}",
            "POST /api/v1/tenants/{tenant_id}/webhook-deliveries/{delivery_id}/redeliver",
        ],
        Permission.WEBHOOK_CONFIGURE,
    ),
    "POST /api/v1/api-keys": Permission.API_KEY_CONFIGURE,
    "GET /api/v1/api-keys": Permission.API_KEY_CONFIGURE,
    "GET /api/v1/api-keys/{key_id}": Permission.API_KEY_CONFIGURE,
    "DELETE /api/v1/api-keys/{key_id}": Permission.API_KEY_CONFIGURE,
    "POST /api/v1/schedules": Permission.SCHEDULE_MANAGE,
    "GET /api/v1/schedules": Permission.SCHEDULE_READ,
    "GET /api/v1/schedules/{schedule_id}": Permission.SCHEDULE_READ,
    "PATCH /api/v1/schedules/{schedule_id}": Permission.SCHEDULE_MANAGE,
    "POST /api/v1/schedules/{schedule_id}/pause": Permission.SCHEDULE_MANAGE,
    "POST /api/v1/schedules/{schedule_id}/resume": Permission.SCHEDULE_MANAGE,
    "DELETE /api/v1/schedules/{schedule_id}": Permission.SCHEDULE_MANAGE,
    "GET /api/v1/schedules/{schedule_id}/tasks": Permission.SCHEDULE_READ,
}


def test_the_table_covers_every_api_route(service: Service) -> None:
    paths = service.app.openapi()["paths"]
    served = {
        f"{method.upper()} {path}"
        for path, operations in paths.items()
        if path.startswith(("/api/", "/v1/"))
        for method in operations
    }
    assert served == {str(route) for route in ROUTES} == set(EXPECTED)


async def _finished_task(service: Service, tenant: str) -> dict[str, Any]:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant, sub="owner") as client:
        accepted = await submit(client)
        await stream(client, accepted["task_id"])
    return accepted


@pytest.mark.parametrize("role", ROLES)
async def test_every_route_answers_each_role_as_its_permissions_say(
    service: Service, tenant: str, role: str
) -> None:
    theirs = await _finished_task(service, tenant)
    service.fake_llm.always(MODEL, Reply.text("Done."))
    roles = () if role == "none" else (role,)
    got: dict[str, int] = {}
    async with service.client(tenant, sub=f"{role}-user", roles=roles) as client:
        for route in ROUTES:
            url = route.url(
                task_id=theirs["task_id"], chain_id=theirs["chain_id"], tenant_id=tenant
            )
            response = await client.request(route.method, url, **route.request_kwargs())
            got[str(route)] = response.status_code
            if response.status_code == 403:
                body = assert_problem(response, 403, "forbidden")
                assert body["permission"] == NEEDS[str(route)], body
            if response.status_code == 202:  # let the accepted run finish
                await stream(client, response.json()["task_id"])

    assert got == {route: statuses[role] for route, statuses in EXPECTED.items()}


async def test_members_cancel_their_own_tasks_and_tenant_admins_any(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("slow", delay_s=30), Reply.text("slow", delay_s=30))
    async with (
        service.client(tenant, sub="ann") as ann,
        service.client(tenant, sub="bob") as bob,
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
    ):
        first = await submit(ann)
        second = await submit(ann)
        await fake.wait_for_requests(2, MODEL)

        refused = await bob.post(f"/api/v1/tasks/{first['task_id']}/cancel")
        own = await ann.post(f"/api/v1/tasks/{first['task_id']}/cancel")
        by_admin = await admin.post(f"/api/v1/tasks/{second['task_id']}/cancel")

    body = assert_problem(refused, 403, "forbidden")
    assert body["permission"] == "task:cancel"
    assert "own" in body["detail"]
    assert own.status_code == 200
    assert own.json()["status"] == "cancelled"
    assert by_admin.status_code == 200
    assert by_admin.json()["status"] == "cancelled"
    assert by_admin.json()["error_message"] == "cancelled by root"


A2A_BASE = test_auth.A2A_BASE
A2A_ROUTES = test_auth.A2A_ROUTES

# The A2A routes (tests/api/test_auth.py's A2A_ROUTES) on the built-in agent, the task a
# finished one of another member. Past the permission the answers are A2A's: the finished
# task cannot be cancelled (a member's refusal, another's task, is A2A's too) nor subscribed
# to without a Last-Event-ID (400 in the HTTP+JSON binding).
A2A_EXPECTED: dict[str, dict[str, int]] = {
    f"GET {A2A_BASE}/.well-known/agent-card.json": ALL,
    f"POST {A2A_BASE}": ALL,
    f"POST {A2A_BASE}/message:send": _only(
        {"platform_admin": 200, "tenant_admin": 200, "member": 200}
    ),
    f"POST {A2A_BASE}/message:stream": _only(
        {"platform_admin": 200, "tenant_admin": 200, "member": 200}
    ),
    f"GET {A2A_BASE}/tasks": ALL,
    f"GET {A2A_BASE}/tasks/{{task_id}}": ALL,
    f"POST {A2A_BASE}/tasks/{{task_id}}:cancel": _only(
        {"platform_admin": 400, "tenant_admin": 400, "member": 400}
    ),
    f"GET {A2A_BASE}/tasks/{{task_id}}:subscribe": dict.fromkeys(ROLES, 400) | {"none": 403},
    f"POST {A2A_BASE}/tasks/{{task_id}}:subscribe": dict.fromkeys(ROLES, 400) | {"none": 403},
}
A2A_NEEDS: dict[str, str] = {
    f"GET {A2A_BASE}/.well-known/agent-card.json": Permission.TASK_READ,
    f"POST {A2A_BASE}": Permission.TASK_READ,  # ListTasks
    f"POST {A2A_BASE}/message:send": Permission.TASK_CREATE,
    f"POST {A2A_BASE}/message:stream": Permission.TASK_CREATE,
    f"GET {A2A_BASE}/tasks": Permission.TASK_READ,
    f"GET {A2A_BASE}/tasks/{{task_id}}": Permission.TASK_READ,
    f"POST {A2A_BASE}/tasks/{{task_id}}:cancel": Permission.TASK_CANCEL,
    f"GET {A2A_BASE}/tasks/{{task_id}}:subscribe": Permission.TASK_READ,
    f"POST {A2A_BASE}/tasks/{{task_id}}:subscribe": Permission.TASK_READ,
}


def test_the_a2a_table_covers_every_a2a_route() -> None:
    served = {
        f"{method} {route.path}".replace("{agent_name}", "{name}").replace("{id}", "{task_id}")
        for route in a2a_router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    assert served == {str(route) for route in A2A_ROUTES} == set(A2A_EXPECTED) == set(A2A_NEEDS)


@pytest.mark.parametrize("role", ROLES)
async def test_every_a2a_route_answers_each_role_as_its_permissions_say(
    service: Service, tenant: str, role: str
) -> None:
    theirs = await _finished_task(service, tenant)
    service.fake_llm.always(MODEL, Reply.text("Done."))
    roles = () if role == "none" else (role,)
    got: dict[str, int] = {}
    async with service.client(tenant, sub=f"{role}-user", roles=roles) as client:
        for route in A2A_ROUTES:
            url = route.url(
                task_id=theirs["task_id"], chain_id=theirs["chain_id"], tenant_id=tenant
            )
            response = await client.request(
                route.method, url, headers={"A2A-Version": "1.0"}, **route.request_kwargs()
            )
            got[str(route)] = response.status_code
            if response.status_code == 403:
                body = assert_problem(response, 403, "forbidden")
                assert body["permission"] == A2A_NEEDS[str(route)], body

    assert got == {route: statuses[role] for route, statuses in A2A_EXPECTED.items()}
