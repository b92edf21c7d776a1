"""Who may use a tenant secret (`usable_by`): set with its value or on its own, kept when the
value is replaced, and held at every use. A member's run cannot use a secret scoped to tenant
admins or to another agent (a failed step, `secret_out_of_scope`, nothing sent), nor an MCP
server one not scoped to it; the audit names the caller behind every use."""

from typing import Any
from uuid import uuid4

import pytest
from aiohttp import web

from tests.api.helpers import (
    assert_invalid,
    assert_problem,
    configure,
    define_agent,
    open_network,
    stream,
    submit,
)
from tests.fakes.a2a_agent import TOKEN as A2A_TOKEN
from tests.fakes.a2a_agent import FakeA2AAgent
from tests.fakes.mcp_server import TOKEN, FakeMcpServer
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.tools.net.servers import serve

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
MEMBER = {"sub": "alice", "roles": ("member",)}
VALUE = "omf_AdminKey-7f3c9e1b2d4a"


def _url(tenant: str, name: str | None = None) -> str:
    base = f"/api/v1/tenants/{tenant}/secrets"
    return base if name is None else f"{base}/{name}"


async def _put(service: Service, tenant: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.put(_url(tenant, name), json=body)
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


async def _audit(service: Service, tenant: str) -> list[dict[str, Any]]:
    async with service.client(tenant, sub="eve", roles=("auditor",)) as auditor:
        response = await auditor.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": 200})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _echo_site(seen: list[str | None]) -> web.Application:
    async def echo(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-Api-Key"))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/echo", echo)
    return app


def _result(events: list[Any], tool: str) -> dict[str, Any]:
    steps = [e.json["step"] for e in events if e.event == "reasoning_step"]
    calls = {
        s["tool_call"]["correlation_id"]
        for s in steps
        if s["type"] == "tool_call" and s["tool_call"]["tool_name"] == tool
    }
    results: list[dict[str, Any]] = [
        s["tool_result"]
        for s in steps
        if s["type"] == "tool_result" and s["tool_result"]["correlation_id"] in calls
    ]
    [result] = results
    return result


async def _send_with_secret(
    service: Service, tenant: str, port: int, name: str, caller: dict[str, Any], **task: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run of `caller` whose model sends the secret `name` to the echo site."""
    arguments = {
        "method": "POST",
        "url": f"http://127.0.0.1:{port}/echo",
        "headers": {"X-Api-Key": {"secret": name}},
    }
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("http_request", arguments, id="h1")]),
        Reply.text("Done."),
    )
    async with service.client(tenant, **caller) as client:
        accepted = await submit(client, input="Call the API.", **task)
        events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed"
    return accepted, _result(events, "http_request")


@pytest.fixture
async def web_tenant(service: Service, tenant: str) -> str:
    await configure(service, tenant, "tools", {"enabled_tools": ["http_request"]})
    await open_network(service, tenant, ["127.0.0.1/32"])
    return tenant


async def test_a_member_cannot_use_a_secret_scoped_to_admins_and_the_audit_names_the_member(
    service: Service, web_tenant: str
) -> None:
    tenant = web_tenant
    await _put(
        service, tenant, "ADMIN_KEY", {"value": VALUE, "usable_by": {"roles": ["tenant_admin"]}}
    )
    seen: list[str | None] = []
    async with serve(_echo_site(seen)) as port:
        refused_task, refused = await _send_with_secret(service, tenant, port, "ADMIN_KEY", MEMBER)
        assert seen == []  # nothing was sent
        used_task, used = await _send_with_secret(service, tenant, port, "ADMIN_KEY", ADMIN)

    assert not refused["success"]
    assert refused["error_code"] == "secret_out_of_scope"
    assert "'ADMIN_KEY'" in refused["error"]
    assert "tenant_admin" in refused["error"]
    assert VALUE not in refused["error"]
    assert used["success"], used
    assert seen == [VALUE]
    audit = await _audit(service, tenant)
    uses = [e for e in audit if e["action"] == "secret.use"]
    by_task = {e["details"]["task_id"]: e for e in uses}
    member_use = by_task[refused_task["task_id"]]
    assert member_use["actor"] == "alice"  # the member behind the run, not the stored key
    assert member_use["resource_id"] == "ADMIN_KEY"
    assert member_use["details"]["outcome"] == "refused"
    assert member_use["details"]["sender"] == {"kind": "tool", "name": "http_request"}
    assert member_use["details"]["roles"] == ["member"]
    assert member_use["details"]["agent"].startswith("default@")
    admin_use = by_task[used_task["task_id"]]
    assert (admin_use["actor"], admin_use["details"]["outcome"]) == ("root", "used")
    [member_call] = [
        e
        for e in audit
        if e["action"] == "tool.execute"
        and e["details"].get("task_id") == refused_task["task_id"]
        and e["resource_id"] == "http_request"
    ]
    assert (member_call["actor"], member_call["details"]["outcome"]) == (
        "alice",
        "secret_out_of_scope",
    )
    assert all(VALUE not in str(event) for event in audit)


async def test_a_secret_scoped_to_another_agent_is_refused_to_the_others(
    service: Service, web_tenant: str
) -> None:
    tenant = web_tenant
    await define_agent(service, tenant, "billing", tools=["http_request"])
    await _put(
        service, tenant, "BILLING_KEY", {"value": VALUE, "usable_by": {"agents": ["billing"]}}
    )
    seen: list[str | None] = []
    async with serve(_echo_site(seen)) as port:
        _, refused = await _send_with_secret(service, tenant, port, "BILLING_KEY", MEMBER)
        accepted, used = await _send_with_secret(
            service, tenant, port, "BILLING_KEY", MEMBER, agent="billing"
        )

    assert refused["error_code"] == "secret_out_of_scope"
    assert "agent 'default'" in refused["error"]
    assert used["success"], used
    assert seen == [VALUE]
    [use] = [
        e
        for e in await _audit(service, tenant)
        if e["action"] == "secret.use" and e["details"]["task_id"] == accepted["task_id"]
    ]
    assert (use["actor"], use["details"]["agent"], use["details"]["outcome"]) == (
        "alice",
        "billing@1",
        "used",
    )


async def test_an_mcp_server_uses_only_a_secret_scoped_to_it_and_each_run_is_held_to_it(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": None})
    await open_network(service, tenant, ["127.0.0.1/32"])
    await _put(
        service, tenant, "MCP_TOKEN", {"value": TOKEN, "usable_by": {"mcp_servers": ["other"]}}
    )
    async with FakeMcpServer() as mcp_server, service.client(tenant, **ADMIN) as admin:
        servers = f"/api/v1/tenants/{tenant}/mcp-servers"
        headers = {"Authorization": {"secret": "MCP_TOKEN", "prefix": "Bearer "}}
        created = await admin.post(
            servers, json={"name": "fake", "url": mcp_server.url, "headers": headers}
        )
        opened_before_scoping = mcp_server.initializations
        scoped = await admin.patch(
            _url(tenant, "MCP_TOKEN"),
            json={"usable_by": {"mcp_servers": ["fake"], "roles": ["tenant_admin"]}},
        )
        refreshed = await admin.post(f"{servers}/{created.json()['id']}/refresh")
        results = {}
        for who, caller in (("member", MEMBER), ("admin", ADMIN)):
            service.fake_llm.script(
                MODEL,
                Reply.tool_calls([ToolCall("fake__add", {"a": 2, "b": 3}, id="a1")]),
                Reply.text("5"),
            )
            async with service.client(tenant, **caller) as client:
                accepted = await submit(client, input="Add 2 and 3.")
                results[who] = _result(await stream(client, accepted["task_id"]), "fake__add")

    assert created.status_code == 201, created.text
    assert created.json()["status"] == "error"
    assert "may not be sent by the MCP server 'fake'" in created.json()["status_detail"]
    assert opened_before_scoping == 0  # refused before anything was sent
    assert scoped.status_code == 200, scoped.text
    assert refreshed.json()["status"] == "ok", refreshed.text
    assert results["member"]["error_code"] == "secret_out_of_scope"
    assert results["admin"]["success"], results["admin"]
    assert [call.tool for call in mcp_server.calls] == ["add"]  # the admin's call alone
    uses = [e for e in await _audit(service, tenant) if e["action"] == "secret.use"]
    assert sorted((e["actor"], e["details"]["outcome"]) for e in uses) == [
        ("alice", "refused"),
        ("root", "used"),
    ]
    assert all(e["details"]["sender"] == {"kind": "mcp_server", "name": "fake"} for e in uses)


async def test_a_scope_is_set_kept_changed_and_cleared_through_the_api(
    service: Service, tenant: str
) -> None:
    scope = {"agents": ["billing"], "roles": ["tenant_admin"], "tools": ["http_request"]}
    full = {"mcp_servers": [], "remote_agents": [], **scope}
    async with service.client(tenant, **ADMIN) as admin:
        created = await admin.put(_url(tenant, "KEY"), json={"value": VALUE, "usable_by": scope})
        replaced = await admin.put(_url(tenant, "KEY"), json={"value": VALUE + "-2"})
        listed = await admin.get(_url(tenant))
        changed = await admin.patch(
            _url(tenant, "KEY"), json={"usable_by": {"remote_agents": ["travel"]}}
        )
        cleared = await admin.patch(_url(tenant, "KEY"), json={"usable_by": None})
        unknown = await admin.patch(_url(tenant, "NOPE"), json={"usable_by": None})
        invalid = [
            await admin.patch(_url(tenant, "KEY"), json={"usable_by": {"users": ["x"]}}),
            await admin.patch(_url(tenant, "KEY"), json={"usable_by": {"agents": ["a b"]}}),
            await admin.patch(_url(tenant, "KEY"), json={}),
            await admin.put(_url(tenant, "KEY"), json={"value": "v", "usable_by": {"roles": "x"}}),
        ]

    assert created.status_code == 201, created.text
    assert created.json()["usable_by"] == full
    assert replaced.json()["usable_by"] == full  # a new value keeps its scope
    assert listed.json()["items"][0]["usable_by"] == full
    assert changed.json()["usable_by"]["remote_agents"] == ["travel"]
    assert cleared.json()["usable_by"] is None
    assert_problem(unknown, 404, "not-found")
    for response in invalid:
        assert_invalid(response, "body")
    events = [
        e for e in await _audit(service, tenant) if e["action"] in ("secret.put", "secret.scope")
    ]
    assert [e["action"] for e in reversed(events)] == [
        "secret.put",
        "secret.put",
        "secret.scope",
        "secret.scope",
    ]
    assert events[0]["details"]["before"]["usable_by"]["remote_agents"] == ["travel"]
    assert events[0]["details"]["after"] == {"name": "KEY", "usable_by": None}
    assert all(VALUE not in str(event) for event in events)


async def test_another_tenant_cannot_scope_a_secret(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await _put(service, other_tenant, "THEIRS", {"value": VALUE})
    async with service.client(tenant, **ADMIN) as admin:
        responses = [
            await admin.patch(
                _url(other_tenant, "THEIRS"), json={"usable_by": {"roles": ["member"]}}
            ),
            await admin.patch(_url(f"ghost-{uuid4().hex[:6]}", "THEIRS"), json={"usable_by": None}),
        ]
    async with service.client(other_tenant, **ADMIN) as theirs:
        listed = (await theirs.get(_url(other_tenant))).json()["items"]

    for response in responses:
        assert_problem(response, 404, "not-found")
    assert listed[0]["usable_by"] is None


async def test_a_remote_agent_not_named_by_a_secrets_scope_cannot_send_it(
    service: Service, tenant: str
) -> None:
    await open_network(service, tenant, ["127.0.0.1/32"])
    await _put(
        service,
        tenant,
        "AGENT_TOKEN",
        {"value": A2A_TOKEN, "usable_by": {"remote_agents": ["travel"]}},
    )
    agents = f"/api/v1/tenants/{tenant}/remote-agents"
    headers = {"Authorization": {"secret": "AGENT_TOKEN", "prefix": "Bearer "}}
    async with FakeA2AAgent(token=A2A_TOKEN) as agent, service.client(tenant, **ADMIN) as admin:
        refused = await admin.post(
            agents, json={"name": "other", "card_url": agent.card_url, "headers": headers}
        )
        listed = (await admin.get(agents)).json()["items"]
        created = await admin.post(
            agents, json={"name": "travel", "card_url": agent.card_url, "headers": headers}
        )

    body = assert_invalid(refused, "body.headers")
    assert "may not be sent by the remote agent 'other'" in body["detail"]
    assert A2A_TOKEN not in refused.text
    assert listed == []
    assert created.status_code == 201, created.text
