"""A tenant's MCP servers: registered over the API against a real MCP server on 127.0.0.1 (the
SDK's, over streamable HTTP, reached through the tenant's network allow-list), their tools
offered to its runs and listed with their schemas, called by the agent, their status kept."""

import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import mcp_types as types
import pytest

from tests.api.helpers import assert_invalid, assert_problem, open_network, stream, submit
from tests.fakes.mcp_server import SUBJECT, TOKEN, FakeMcpServer
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
SECRET = "MCP_TOKEN"
AUTHORIZATION = {"Authorization": {"secret": SECRET, "prefix": "Bearer "}}


@pytest.fixture
async def mcp_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


@pytest.fixture
async def mcp_tenant(service: Service) -> str:
    """A tenant whose runs may use every tool (its MCP servers' among them) and reach
    127.0.0.1, where the test's MCP server listens, with the server's token as a secret."""
    tenant = await service.create_tenant(f"m-{uuid4().hex[:12]}", enabled_tools=None)
    await open_network(service, tenant, ["127.0.0.1/32"])
    await set_secret(service, tenant, SECRET, TOKEN)
    return tenant


async def set_secret(service: Service, tenant: str, name: str, value: str) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.put(
            f"/api/v1/tenants/{tenant}/secrets/{name}", json={"value": value}
        )
    assert response.status_code in (200, 201), response.text


async def register(
    service: Service, tenant: str, server: FakeMcpServer, **fields: Any
) -> dict[str, Any]:
    body = {"name": "fake", "url": server.url, "headers": AUTHORIZATION, **fields}
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(f"/api/v1/tenants/{tenant}/mcp-servers", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def base(tenant: str) -> str:
    return f"/api/v1/tenants/{tenant}/mcp-servers"


async def run_task(
    service: Service, tenant: str, *replies: Reply, **submission: Any
) -> tuple[dict[str, Any], list[Any]]:
    """Scripts the model, submits a task and reads its stream to the end."""
    service.fake_llm.script(MODEL, *replies)
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Use the MCP tools.", **submission)
        events = await stream(client, accepted["task_id"])
    return accepted, events


def steps_of(events: list[Any], kind: str) -> list[dict[str, Any]]:
    return [
        e.json["step"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == kind
    ]


def mcp_results(events: list[Any]) -> list[dict[str, Any]]:
    """The `tool_result` steps of the MCP tools' calls."""
    calls = {
        step["tool_call"]["correlation_id"]
        for step in steps_of(events, "tool_call")
        if step["tool_call"]["tool_name"].startswith("fake__")
    }
    return [
        step["tool_result"]
        for step in steps_of(events, "tool_result")
        if step["tool_result"]["correlation_id"] in calls
    ]


async def test_a_registered_servers_tools_are_offered_with_their_schemas(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(service, mcp_tenant, mcp_server)

    assert created["status"] == "ok"
    assert created["status_detail"] is None
    assert created["checked_at"] is not None
    assert created["headers"] == AUTHORIZATION
    assert [(t["name"], t["tool"]) for t in created["tools"]] == [
        ("fake__add", "add"),
        ("fake__whoami", "whoami"),
        ("fake__slow_count", "slow_count"),
    ]
    async with service.client(mcp_tenant) as member:
        listed = (await member.get("/api/v1/tools")).json()["items"]
    tools = {tool["name"]: tool for tool in listed}
    add = tools["fake__add"]
    assert add["type"] == "mcp"
    assert add["description"] == "Adds two numbers."
    assert add["parameters"] == mcp_server.tools()[0].input_schema
    assert add["usable"] is True
    assert {"fake__whoami", "fake__slow_count"} <= set(tools)


async def test_the_agent_calls_an_mcp_tool_with_the_right_arguments(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    await register(service, mcp_tenant, mcp_server)

    _, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__add", {"a": 19, "b": 23}, id="c1")]),
        Reply.text("19 + 23 = 42."),
    )

    assert events[-1].json["final_state"] == "completed"
    [received] = mcp_server.calls_of("add")
    assert received.arguments == {"a": 19, "b": 23}
    [result] = mcp_results(events)
    assert result["success"] is True
    assert result["result"] == "42"
    [call] = [
        s for s in steps_of(events, "tool_call") if s["tool_call"]["tool_name"] == "fake__add"
    ]
    assert call["tool_call"]["tool_type"] == "mcp"
    assert call["tool_call"]["arguments"] == {"a": 19, "b": 23}


async def test_the_token_reaches_the_server_and_nothing_else_shows_it(
    service: Service,
    mcp_tenant: str,
    mcp_server: FakeMcpServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await register(service, mcp_tenant, mcp_server)

    accepted, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__whoami", {}, id="c1")]),
        Reply.text("You are the robot."),
    )

    [received] = mcp_server.calls_of("whoami")
    assert received.authorization == f"Bearer {TOKEN}"
    [result] = mcp_results(events)
    assert result["result"] == {"subject": SUBJECT}
    async with service.client(mcp_tenant, **ADMIN) as admin:
        task_id = accepted["task_id"]
        shown = [
            json.dumps([(e.event, e.data) for e in events]),
            (await admin.get(f"/api/v1/tasks/{task_id}/chain")).text,
            (await admin.get(f"/api/v1/chains/{accepted['chain_id']}/export")).text,
            (await admin.get(f"/api/v1/tenants/{mcp_tenant}/audit")).text,
            (await admin.get(base(mcp_tenant))).text,
        ]
    shown.append("\n".join(record.getMessage() for record in caplog.records))
    for text in shown:
        assert TOKEN not in text


async def test_a_wrong_secret_fails_the_step_with_the_servers_error(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    wrong = "wrong-" + "x" * 20
    await set_secret(service, mcp_tenant, SECRET, wrong)
    await register(service, mcp_tenant, mcp_server)

    _, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__whoami", {}, id="c1")]),
        Reply.text("The server refused the token."),
    )

    assert events[-1].json["final_state"] == "completed"
    [result] = mcp_results(events)
    assert result["success"] is False
    assert result["error_code"] == "tool_error"
    # The server's own words, with the token it echoed masked.
    assert result["error"] == (
        "'whoami' of MCP server 'fake' answered an error: "
        "401 unauthorized: 'Bearer [secret]' is not a token it knows"
    )
    assert wrong not in json.dumps([e.data for e in events])


async def test_a_secret_set_anew_is_sent_from_the_next_call_on(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    await set_secret(service, mcp_tenant, SECRET, "stale-" + "y" * 20)
    await register(service, mcp_tenant, mcp_server)
    await set_secret(service, mcp_tenant, SECRET, TOKEN)

    _, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__whoami", {}, id="c1")]),
        Reply.text("You are the robot."),
    )

    [result] = mcp_results(events)
    assert result["success"] is True
    assert mcp_server.calls_of("whoami")[-1].authorization == f"Bearer {TOKEN}"
    assert mcp_server.initializations == 2  # a new session, with the new value


async def test_a_stopped_server_fails_the_step_the_run_completes_and_the_status_says_so(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(service, mcp_tenant, mcp_server)
    await mcp_server.stop()

    _, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__add", {"a": 1, "b": 2}, id="c1")]),
        Reply.text("The MCP server is down; 1 + 2 = 3 anyway."),
    )

    assert events[-1].json["final_state"] == "completed"
    [result] = mcp_results(events)
    assert result["success"] is False
    assert result["error_code"] == "tool_unavailable"
    assert result["error"].startswith("the MCP server 'fake' is unavailable: ")
    async with service.client(mcp_tenant, **ADMIN) as admin:
        server = (await admin.get(f"{base(mcp_tenant)}/{created['id']}")).json()
        assert server["status"] == "error"
        assert server["status_detail"] == result["error"]
        assert server["checked_at"] > created["checked_at"]
        # Its tools stay offered while it is away: a call says it is unavailable.
        assert [t["name"] for t in server["tools"]] == [t["name"] for t in created["tools"]]

        await mcp_server.start()
        back = (await admin.post(f"{base(mcp_tenant)}/{created['id']}/refresh")).json()
    assert back["status"] == "ok"
    assert back["status_detail"] is None


async def test_progress_events_arrive_in_order_between_the_call_and_its_result(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    await register(service, mcp_tenant, mcp_server)

    _, events = await run_task(
        service,
        mcp_tenant,
        Reply.tool_calls([ToolCall("fake__slow_count", {"n": 3}, id="c1")]),
        Reply.text("Counted."),
    )

    [call] = [
        e
        for e in events
        if e.event == "reasoning_step"
        and e.json["step"]["type"] == "tool_call"
        and e.json["step"]["tool_call"]["tool_name"] == "fake__slow_count"
    ]
    at = events.index(call)
    progress = events[at + 1 : at + 4]
    assert [e.event for e in progress] == ["tool_progress"] * 3
    assert [(e.json["message"], e.json["fraction"]) for e in progress] == [
        ("counted 1", 1 / 3),
        ("counted 2", 2 / 3),
        ("counted 3", 1.0),
    ]
    assert {e.json["step_id"] for e in progress} == {call.json["step"]["id"]}
    result = events[at + 4].json["step"]
    assert result["type"] == "tool_result"
    assert result["tool_result"]["result"] == "counted to 3"


async def test_calls_of_several_runs_reuse_one_session(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    await register(service, mcp_tenant, mcp_server)
    for a in range(3):
        await run_task(
            service,
            mcp_tenant,
            Reply.tool_calls(
                [
                    ToolCall("fake__add", {"a": a, "b": 1}, id="c1"),
                    ToolCall("fake__add", {"a": a, "b": 2}, id="c2"),
                ]
            ),
            Reply.text("Added."),
        )

    assert len(mcp_server.calls_of("add")) == 6
    assert mcp_server.initializations == 1  # the handshake of the registration's discovery
    assert len(mcp_server.sessions) == 1


async def test_a_tool_list_change_is_discovered_on_its_own(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(service, mcp_tenant, mcp_server)
    listed = mcp_server.list_requests
    echo = types.Tool(
        name="echo", description="Echoes.", input_schema={"type": "object", "properties": {}}
    )

    await mcp_server.change_tools([echo])
    await mcp_server.wait_for_list_request(listed + 1)
    mcp = service.state.toolbox.mcp
    assert mcp is not None
    await mcp.settled()

    async with service.client(mcp_tenant, **ADMIN) as admin:
        server = (await admin.get(f"{base(mcp_tenant)}/{created['id']}")).json()
        tools = (await admin.get("/api/v1/tools")).json()["items"]
    assert server["tools"][-1]["name"] == "fake__echo"
    assert "fake__echo" in {tool["name"] for tool in tools}


async def test_tools_that_cannot_be_offered_are_skipped_and_reported(
    service: Service, mcp_tenant: str
) -> None:
    extra = [
        types.Tool(
            name="bogus", input_schema={"type": "object", "properties": {"x": {"type": "bogus"}}}
        ),
        types.Tool(name="get.item", input_schema={"type": "object"}),
        types.Tool(name="get/item", input_schema={"type": "object"}),
    ]
    async with FakeMcpServer(extra_tools=extra) as server:
        created = await register(service, mcp_tenant, server)

    assert created["status"] == "ok"
    assert [t["tool"] for t in created["tools"]] == ["add", "whoami", "slow_count"]
    skipped = {entry["tool"]: entry["reason"] for entry in created["skipped_tools"]}
    assert skipped == {
        "bogus": "its inputSchema is not a valid JSON Schema at properties/x/type: "
        "'bogus' is not valid under any of the given schemas",
        "get.item": "its name 'fake__get_item' would also be that of 'get/item'",
        "get/item": "its name 'fake__get_item' would also be that of 'get.item'",
    }
    assert created["status_detail"] == "; ".join(
        f"skipped {tool!r}: {reason}" for tool, reason in skipped.items()
    )


async def test_allowed_tools_and_tool_roles_decide_what_runs_get(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(
        service,
        mcp_tenant,
        mcp_server,
        allowed_tools=["add", "whoami", "nope"],
        tool_roles={"whoami": ["tenant_admin"]},
    )
    assert [(t["tool"], t["allowed"]) for t in created["tools"]] == [
        ("add", True),
        ("whoami", True),
        ("slow_count", False),
    ]
    assert created["status_detail"] == "allowed_tools names tools it does not list: nope"
    async with service.client(mcp_tenant) as member:
        listed = {t["name"]: t for t in (await member.get("/api/v1/tools")).json()["items"]}
    assert "fake__slow_count" not in listed
    assert listed["fake__add"]["usable"] is True
    assert listed["fake__whoami"]["usable"] is False
    assert listed["fake__whoami"]["required_roles"] == ["tenant_admin"]

    async with service.client(mcp_tenant, **ADMIN) as admin:
        patched = await admin.patch(
            f"{base(mcp_tenant)}/{created['id']}", json={"allowed_tools": None, "name": "calc"}
        )
        assert patched.status_code == 200, patched.text
        listed_now = {t["name"] for t in (await admin.get("/api/v1/tools")).json()["items"]}
    assert [t["name"] for t in patched.json()["tools"]] == [
        "calc__add",
        "calc__whoami",
        "calc__slow_count",
    ]
    assert {"calc__add", "calc__whoami", "calc__slow_count"} <= listed_now
    assert not any(name.startswith("fake__") for name in listed_now)
    assert mcp_server.initializations == 1  # neither change reached the server anew


async def test_changes_are_audited_with_secret_references_and_no_values(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(
        service, mcp_tenant, mcp_server, headers={**AUTHORIZATION, "X-Team": "blue"}
    )
    async with service.client(mcp_tenant, **ADMIN) as admin:
        one = f"{base(mcp_tenant)}/{created['id']}"
        patched = await admin.patch(one, json={"headers": AUTHORIZATION})
        assert patched.status_code == 200, patched.text
        assert (await admin.delete(one)).status_code == 204
        assert_problem(await admin.get(one), 404, "not-found")
        audit = (
            await admin.get(f"/api/v1/tenants/{mcp_tenant}/audit", params={"limit": 200})
        ).json()["items"]

    rows = {row["action"]: row for row in audit if row["resource_type"] == "mcp_server"}
    assert set(rows) == {"mcp_server.create", "mcp_server.update", "mcp_server.delete"}
    assert all(row["resource_id"] == created["id"] for row in rows.values())
    assert rows["mcp_server.create"]["actor"] == "root"
    assert rows["mcp_server.create"]["details"]["after"]["headers"] == {
        **AUTHORIZATION,
        "X-Team": "[text]",
    }
    assert rows["mcp_server.update"]["details"] == {
        "before": {"headers": {**AUTHORIZATION, "X-Team": "[text]"}},
        "after": {"headers": AUTHORIZATION},
        "actor_tenant": mcp_tenant,
    }
    assert rows["mcp_server.delete"]["details"]["after"] is None
    assert TOKEN not in json.dumps(audit)
    assert "blue" not in json.dumps(audit)


async def test_a_deleted_server_offers_nothing_and_its_session_closes(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(service, mcp_tenant, mcp_server)
    async with service.client(mcp_tenant, **ADMIN) as admin:
        assert (await admin.delete(f"{base(mcp_tenant)}/{created['id']}")).status_code == 204
        listed = {t["name"] for t in (await admin.get("/api/v1/tools")).json()["items"]}
        servers = (await admin.get(base(mcp_tenant))).json()["items"]
    mcp = service.state.toolbox.mcp
    assert mcp is not None
    await mcp.settled()

    assert not any(name.startswith("fake__") for name in listed)
    assert servers == []
    assert mcp_server.open_sessions == 0


async def test_names_are_unique_in_a_tenant(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    await register(service, mcp_tenant, mcp_server)
    async with service.client(mcp_tenant, **ADMIN) as admin:
        again = await admin.post(base(mcp_tenant), json={"name": "fake", "url": mcp_server.url})
    assert_problem(again, 409, "mcp-server-exists")


async def test_a_server_the_guard_refuses_is_registered_with_the_reason(
    service: Service, mcp_server: FakeMcpServer
) -> None:
    tenant = await service.create_tenant(f"n-{uuid4().hex[:12]}", enabled_tools=None)

    created = await register(service, tenant, mcp_server, headers={})

    assert created["status"] == "error"
    assert created["tools"] == []
    assert created["status_detail"].startswith(f"refused {mcp_server.url}: 127.0.0.1 is ")
    assert mcp_server.initializations == 0


async def test_a_missing_secret_is_the_servers_error_status(
    service: Service, mcp_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(
        service, mcp_tenant, mcp_server, headers={"Authorization": {"secret": "NOT_SET"}}
    )

    assert created["status"] == "error"
    assert "'NOT_SET' is not set for this tenant" in created["status_detail"]
    assert mcp_server.initializations == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad Name", "url": "http://127.0.0.1:1/mcp"}, "body.name"),
        ({"name": "x" * 32, "url": "http://127.0.0.1:1/mcp"}, "body.name"),
        ({"name": "ok", "url": "ftp://127.0.0.1/mcp"}, "body.url"),
        ({"name": "ok", "url": "http://user:pw@127.0.0.1/mcp"}, "body.url"),
        ({"name": "ok", "url": "not a url"}, "body.url"),
        ({"name": "ok", "url": "http://127.0.0.1:1/", "headers": {"Host": "x"}}, "body.headers"),
        ({"name": "ok", "url": "http://127.0.0.1:1/", "headers": {"a b": "x"}}, "body.headers"),
        (
            {"name": "ok", "url": "http://127.0.0.1:1/", "headers": {"X": "a\r\nB: c"}},
            "body.headers",
        ),
        (
            {"name": "ok", "url": "http://127.0.0.1:1/", "headers": {"X": {"secret": "1x"}}},
            "body.headers",
        ),
        (
            {"name": "ok", "url": "http://127.0.0.1:1/", "headers": {"X": {"secret": "A", "b": 1}}},
            "body.headers",
        ),
        ({"name": "ok", "url": "http://127.0.0.1:1/", "tool_roles": {"a": []}}, "body.tool_roles"),
        ({"name": "ok", "url": "http://127.0.0.1:1/", "surprise": 1}, "body.surprise"),
    ],
)
async def test_invalid_registrations_are_refused_naming_the_field(
    service: Service, tenant: str, body: dict[str, Any], field: str
) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(base(tenant), json=body)
    assert_invalid(response, field)


async def test_members_may_not_manage_servers_and_other_tenants_servers_do_not_exist(
    service: Service, mcp_tenant: str, other_tenant: str, mcp_server: FakeMcpServer
) -> None:
    created = await register(service, mcp_tenant, mcp_server)
    one = f"{base(mcp_tenant)}/{created['id']}"
    async with service.client(mcp_tenant) as member:
        assert_problem(await member.get(base(mcp_tenant)), 403, "forbidden")
        assert_problem(await member.post(f"{one}/refresh"), 403, "forbidden")
    async with service.client(other_tenant, **ADMIN) as stranger:
        for response in [
            await stranger.get(base(mcp_tenant)),
            await stranger.get(one),
            await stranger.patch(one, json={"name": "mine"}),
            await stranger.post(f"{one}/refresh"),
            await stranger.delete(one),
            await stranger.post(base(mcp_tenant), json={"name": "x", "url": mcp_server.url}),
        ]:
            assert_problem(response, 404, "not-found")
        theirs = f"{base(other_tenant)}/{created['id']}"
        for response in [
            await stranger.get(theirs),
            await stranger.patch(theirs, json={"name": "mine"}),
            await stranger.post(f"{theirs}/refresh"),
            await stranger.delete(theirs),
        ]:
            assert_problem(response, 404, "not-found")
        tools = {t["name"] for t in (await stranger.get("/api/v1/tools")).json()["items"]}
    assert not any(name.startswith("fake__") for name in tools)
    async with service.client(mcp_tenant, **ADMIN) as admin:
        assert (await admin.get(one)).json()["name"] == "fake"
