"""Human approval of tool calls: a call that needs it suspends its run (the task waits
`input_required`, no run of it live), a decision resumes it from its stored steps, edited
arguments reach the tool, a denial or a timeout reaches the model, and only those allowed
decide, within their tenant."""

import asyncio
import json
from uuid import UUID

from tests.api.helpers import (
    assert_invalid,
    assert_problem,
    configure,
    define_agent,
    result_of,
    stream,
    submit,
    tool_message,
    until_event,
)
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


def script_calculation(service: Service, answer: str = "done") -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text(answer),
    )


async def test_an_edited_approval_resumes_a_suspended_run_and_the_tool_gets_the_edit(
    service: Service, tenant: str, other_tenant: str
) -> None:
    await configure(service, tenant, "approvals", {"tools": {"calculator": "always"}})
    script_calculation(service)
    admin = service.client(tenant, sub="root", roles=("tenant_admin",))
    outsider = service.client(other_tenant, sub="root", roles=("tenant_admin",))
    async with service.client(tenant) as alice, admin, outsider:
        task_id = (await submit(alice))["task_id"]
        seen = await until_event(alice, task_id, "task_status", state="input_required")
        [required] = [e.json for e in seen if e.event == "approval_required"]
        # The call step is stored before the run stops; it waits with nothing of it live.
        assert [e.event for e in seen][-2:] == ["approval_required", "task_status"]
        await asyncio.wait_for(service.state.runs.left(UUID(task_id)), 10)
        task = (await alice.get(f"/api/v1/tasks/{task_id}")).json()
        assert task["status"] == "input_required"
        assert service.state.runs.active_runs == 0
        approvals = (await alice.get(f"/api/v1/tasks/{task_id}/approvals")).json()["items"]
        [approval] = approvals
        assert approval["status"] == "pending"
        assert approval["tool"] == "calculator"
        assert approval["arguments"] == {"expression": "6 * 7"}
        assert approval["id"] == required["approval_id"]
        assert approval["step_id"] == required["step_id"]
        assert required["arguments"] == {"expression": "6 * 7"}
        inbox = (await admin.get("/api/v1/approvals", params={"status": "pending"})).json()
        assert [item["id"] for item in inbox["items"]] == [approval["id"]]
        url = f"/api/v1/tasks/{task_id}/approvals/{approval['id']}"

        # A member without `task:approve` may not decide; another tenant does not see it.
        refused = await alice.post(url, json={"decision": "approve"})
        assert assert_problem(refused, 403, "forbidden")["permission"] == "task:approve"
        assert_problem(await outsider.post(url, json={"decision": "approve"}), 404, "not-found")
        assert_problem(await outsider.get(f"/api/v1/tasks/{task_id}/approvals"), 404, "not-found")
        assert (await outsider.get("/api/v1/approvals")).json()["items"] == []
        # Edited arguments must fit the tool's schema.
        bad = await admin.post(url, json={"decision": "approve", "arguments": {"expression": 5}})
        assert_invalid(bad, "body.arguments.expression")

        edited = {"expression": "6 * 8"}
        decided = await admin.post(
            url, json={"decision": "approve", "arguments": edited, "reason": "one more row"}
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
        assert decided.json()["decided_by"] == "root"
        events = await stream(alice, task_id)
        again = await admin.post(url, json={"decision": "deny"})
        assert_problem(again, 409, "approval-decided")
        chain = (await alice.get(f"/api/v1/tasks/{task_id}/chain")).json()
        audit = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"action": "approval.*"})

    assert events[-1].json["final_state"] == "completed"
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    types = [e.event for e in events]
    assert types.count("approval_required") == 1
    assert types.count("done") == 1
    resumed = [e.json for e in events if e.event == "task_status" and e.json.get("resumed")]
    assert len(resumed) == 1
    [decision] = [e.json for e in events if e.event == "approval_decided"]
    assert decision["decision"] == "approved"
    assert decision["arguments"] == edited
    # The resumed run says so, then what was decided, then goes on.
    at = types.index("approval_decided")
    assert events[at - 1].json.get("resumed") is True
    # The tool got the edited arguments; the model read their result.
    calculated = result_of(chain, "calculator")
    assert calculated["success"] is True
    assert "48" in json.dumps(calculated["result"])
    assert "48" in tool_message(service.fake_llm.requests[-1].body)
    # Two LLM calls, each made once.
    assert len(service.fake_llm.requests) == 2
    [row] = audit.json()["items"]
    assert row["action"] == "approval.decide"
    assert row["actor"] == "root"
    assert row["details"]["decision"] == "approved"
    assert row["details"]["arguments_edited"] is True


async def test_a_denial_reaches_the_model_as_an_observation_with_its_reason(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "approvals", {"types": {"skill": "always"}})
    script_calculation(service, answer="I may not calculate that.")
    async with (
        service.client(tenant) as alice,
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
    ):
        task_id = (await submit(alice))["task_id"]
        approval_id = (await until_event(alice, task_id, "approval_required"))[-1].json[
            "approval_id"
        ]
        denied = await admin.post(
            f"/api/v1/tasks/{task_id}/approvals/{approval_id}",
            json={"decision": "deny", "reason": "not during the audit"},
        )
        assert denied.status_code == 200, denied.text
        events = await stream(alice, task_id)
        chain = (await alice.get(f"/api/v1/tasks/{task_id}/chain")).json()

    assert events[-1].json["final_state"] == "completed"
    assert result_of(chain, "calculator")["error_code"] == "approval_denied"
    told = tool_message(service.fake_llm.requests[-1].body)
    assert "denied" in told
    assert "not during the audit" in told


async def test_a_call_nobody_decides_on_is_denied_when_its_timeout_passes(
    service: Service, tenant: str
) -> None:
    await define_agent(
        service,
        tenant,
        "careful",
        tools=["calculator"],
        approvals={"tools": {"calculator": "always"}, "timeout_s": 1},
    )
    script_calculation(service, answer="Nobody answered.")
    async with (
        service.client(tenant) as alice,
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
    ):
        task_id = (await submit(alice, agent="careful"))["task_id"]
        events = await stream(alice, task_id)  # through the timeout, the resume and `done`
        [approval] = (await alice.get(f"/api/v1/tasks/{task_id}/approvals")).json()["items"]
        audit = await admin.get(
            f"/api/v1/tenants/{tenant}/audit", params={"action": "approval.expire"}
        )

    assert events[-1].json["final_state"] == "completed"
    assert approval["status"] == "expired"
    assert approval["decided_by"] is None
    [decision] = [e.json for e in events if e.event == "approval_decided"]
    assert decision["decision"] == "expired"
    assert "nobody approved" in tool_message(service.fake_llm.requests[-1].body)
    [row] = audit.json()["items"]
    assert row["actor"] == "system"


async def test_a_submitter_decides_on_their_own_task_where_the_agent_allows_it(
    service: Service, tenant: str
) -> None:
    await define_agent(
        service,
        tenant,
        "self-serve",
        tools=["calculator"],
        approvals={"tools": {"calculator": "always"}, "submitter_decides": True},
    )
    script_calculation(service)
    async with service.client(tenant) as alice, service.client(tenant, sub="bob") as bob:
        task_id = (await submit(alice, agent="self-serve"))["task_id"]
        approval_id = (await until_event(alice, task_id, "approval_required"))[-1].json[
            "approval_id"
        ]
        url = f"/api/v1/tasks/{task_id}/approvals/{approval_id}"
        assert_problem(await bob.post(url, json={"decision": "approve"}), 403, "forbidden")
        approved = await alice.post(url, json={"decision": "approve"})
        assert approved.status_code == 200, approved.text
        events = await stream(alice, task_id)
    assert events[-1].json["final_state"] == "completed"
    assert "42" in tool_message(service.fake_llm.requests[-1].body)


async def test_a_waiting_task_counts_nothing_against_concurrent_runs_and_can_be_cancelled(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "approvals", {"tools": {"calculator": "always"}})
    await configure(service, tenant, "quotas", {"concurrent_runs": 1})
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text("the second one"),
    )
    async with service.client(tenant) as alice:
        waiting = (await submit(alice))["task_id"]
        await until_event(alice, waiting, "approval_required")
        other = await submit(alice)  # the waiting task holds no run slot
        assert (await stream(alice, other["task_id"]))[-1].json["final_state"] == "completed"
        cancelled = await alice.post(f"/api/v1/tasks/{waiting}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        events = await stream(alice, waiting)
        [approval] = (await alice.get(f"/api/v1/tasks/{waiting}/approvals")).json()["items"]
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            late = await admin.post(
                f"/api/v1/tasks/{waiting}/approvals/{approval['id']}",
                json={"decision": "approve"},
            )
    assert events[-1].json["final_state"] == "cancelled"
    assert [e.event for e in events].count("done") == 1
    assert approval["status"] == "denied"
    assert late.status_code == 409, late.text
    # The approved calculation never ran: the model was asked once for the first task.
    assert not any("42" in json.dumps(r.body) for r in service.fake_llm.requests)
