"""Tools a caller's roles may not use: never offered to its runs, refused when named, and a
call the model makes anyway is a failed step (`permission_denied`), not an execution."""

from typing import Any
from uuid import uuid4

from tests.api.helpers import assert_problem, stream, submit
from tests.api.tools import BUILTIN_TOOLS
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

TOOLS = [*BUILTIN_TOOLS, "admin_report"]


def _offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


async def _tenant_with_admin_tool(service: Service) -> str:
    return await service.create_tenant(f"p-{uuid4().hex[:12]}", enabled_tools=TOOLS)


async def test_a_members_run_is_not_offered_an_admin_tool_and_a_forced_call_is_denied(
    service: Service,
) -> None:
    tenant = await _tenant_with_admin_tool(service)
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("admin_report", {}, id="a1")]),
        Reply.text("I may not run that report."),
    )
    async with service.client(tenant, sub="mia", roles=("member",)) as client:
        accepted = await submit(client, input="Report on our users.")
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/chains/{accepted['chain_id']}")).json()

    first = fake.requests_for(MODEL)[0].body
    assert _offered(first) == set(BUILTIN_TOOLS)
    results = [s for s in chain["steps"] if s["tool_result"] and not s["tool_result"]["model"]]
    [denied] = results
    assert denied["tool_result"]["success"] is False
    assert denied["tool_result"]["error_code"] == "permission_denied"
    assert "tenant_admin" in denied["tool_result"]["error"]
    assert events[-1].json["final_state"] == "completed"  # the run goes on after a refusal
    assert chain["metrics"]["failed_tool_calls"] == 1


async def test_a_tenant_admins_run_is_offered_the_tool_and_may_use_it(service: Service) -> None:
    tenant = await _tenant_with_admin_tool(service)
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("admin_report", {}, id="a1")]),
        Reply.text("There are 3 users."),
    )
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as client:
        accepted = await submit(client, input="Report on our users.")
        await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/chains/{accepted['chain_id']}")).json()

    assert "admin_report" in _offered(fake.requests_for(MODEL)[0].body)
    results = [s for s in chain["steps"] if s["tool_result"] and not s["tool_result"]["model"]]
    assert [r["tool_result"]["result"] for r in results] == [{"users": 3}]


async def test_naming_a_tool_the_caller_may_not_use_is_refused_and_an_unenabled_one_is_unknown(
    service: Service,
) -> None:
    tenant = await _tenant_with_admin_tool(service)
    async with service.client(tenant, sub="mia", roles=("member",)) as client:
        refused = await client.post(
            "/api/v1/tasks", json={"input": "Report.", "tools": ["calculator", "admin_report"]}
        )
        unenabled = await client.post(
            "/api/v1/tasks", json={"input": "x", "tools": ["vault_store"]}
        )
        tools = await client.get("/api/v1/tools")

    body = assert_problem(refused, 403, "forbidden")
    assert "permission" not in body  # the caller lacks a role, not a permission
    assert body["errors"] == [
        {
            "field": "body.tools.1",
            "message": "'admin_report' requires one of the roles: tenant_admin",
        }
    ]
    body = assert_problem(unenabled, 422, "validation-error")
    assert body["errors"][0]["field"] == "body.tools.0"
    assert "not enabled" in body["errors"][0]["message"]
    listed = {tool["name"]: tool["usable"] for tool in tools.json()["items"]}
    assert listed == {"calculator": True, "current_time": True, "admin_report": False}
