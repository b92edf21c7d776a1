"""Erasure: `DELETE` of a task or a conversation removes its content from every table at
once (a running task is cancelled first), leaves one audit event without content, and keeps
the tenant's cost and usage reports as they were."""

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import httpx
from sqlalchemy import inspect, text

from tests.api.helpers import assert_problem, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

TOOLS = ["calculator", "current_time", "todo_add", "vault_store"]


async def _tables_holding(service: Service, marker: str) -> dict[str, int]:
    """Every table of the database (as it is, not as the code declares it), every row cast
    to text: which hold `marker`, and in how many rows."""
    found: dict[str, int] = {}
    async with service.state.database.read() as connection:
        names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        for name in names:
            rows = (await connection.execute(text(f'SELECT * FROM "{name}"'))).all()
            hits = sum(marker in repr(tuple(row)) for row in rows)
            if hits:
                found[name] = hits
    return found


async def _audit(admin: httpx.AsyncClient, tenant: str, **params: str) -> list[dict[str, Any]]:
    response = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"limit": "200", **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def _reports(admin: httpx.AsyncClient, tenant: str) -> list[Any]:
    """The tenant's costs by user and by model, and its usage, over whole UTC days."""
    today = datetime.now(UTC).date()
    since, until = today - timedelta(days=1), today + timedelta(days=2)
    period = {"from": f"{since}T00:00:00Z", "to": f"{until}T00:00:00Z"}
    answers = []
    for group_by in ("user", "model"):
        costs = await admin.get(
            f"/api/v1/tenants/{tenant}/costs", params={**period, "group_by": group_by}
        )
        answers.append(costs.json())
    usage = await admin.get(
        f"/api/v1/tenants/{tenant}/usage", params={"from": str(since), "to": str(until)}
    )
    return [*answers, usage.json()]


async def test_erasing_a_task_leaves_no_trace_of_its_content_and_one_audit_event(
    service: Service, tenant: str, other_tenant: str
) -> None:
    marker = f"marker-{uuid4().hex}"
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [
                ToolCall("todo_add", {"text": f"remember {marker}"}, id="c1"),
                ToolCall("vault_store", {"name": marker, "password": "hunter2"}, id="c2"),
            ]
        ),
        Reply.text(f"Noted: {marker}."),
    )
    async with (
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
        service.client(tenant) as alice,
        service.client(other_tenant, sub="root", roles=("tenant_admin",)) as stranger,
    ):
        tools = await admin.put(f"/api/v1/tenants/{tenant}/tools", json={"enabled_tools": TOOLS})
        assert tools.status_code == 200, tools.text
        task_id = (await submit(alice, input=f"Please keep {marker} safe."))["task_id"]
        events = await stream(alice, task_id)
        chain = await admin.get(f"/api/v1/tasks/{task_id}/chain")
        await service.state.runs.record_audit([])  # the stream's opening, stored
        held_before = await _tables_holding(service, marker)
        reports_before = await _reports(admin, tenant)

        by_member = await alice.delete(f"/api/v1/tasks/{task_id}")
        by_stranger = await stranger.delete(f"/api/v1/tasks/{task_id}")
        erased = await admin.delete(f"/api/v1/tasks/{task_id}")
        again = await admin.delete(f"/api/v1/tasks/{task_id}")
        read = await alice.get(f"/api/v1/tasks/{task_id}")
        chain_after = await admin.get(f"/api/v1/tasks/{task_id}/chain")
        reports_after = await _reports(admin, tenant)
        audit = await _audit(admin, tenant)
        metrics = (await admin.get("/metrics")).text

    assert events[-1].json["final_state"] == "completed"
    assert chain.status_code == 200
    # The marker was in the task, its steps, events, todo list and audit events.
    assert {"tasks", "reasoning_steps", "task_todos", "audit_events"} <= set(held_before)
    assert_problem(by_member, 403, "forbidden")
    assert by_member.json()["permission"] == "task:delete"
    assert_problem(by_stranger, 404, "not-found")
    assert erased.status_code == 204, erased.text
    assert erased.content == b""
    assert_problem(again, 404, "not-found")
    assert_problem(read, 404, "not-found")
    assert_problem(chain_after, 404, "not-found")
    assert await _tables_holding(service, marker) == {}
    about_task = [event for event in audit if task_id in json.dumps(event)]
    assert [(e["action"], e["actor"], e["resource_id"]) for e in about_task] == [
        ("task.erase", "root", task_id)
    ]
    assert about_task[0]["details"]["task_ids"] == [task_id]
    assert reports_after == reports_before
    assert reports_before[0]["totals"]["calls"] == 2
    assert 'omniforge_purged_rows_total{reason="erasure",table="tasks"}' in metrics


async def test_erasing_a_running_task_cancels_it_first(service: Service, tenant: str) -> None:
    release = asyncio.Event()
    service.fake_llm.script(MODEL, Reply.text("never seen", gate=release))
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        task_id = (await submit(admin, input="Think hard"))["task_id"]
        await service.fake_llm.wait_for_requests(1)
        erased = await admin.delete(f"/api/v1/tasks/{task_id}")
        read = await admin.get(f"/api/v1/tasks/{task_id}")
        audit = await _audit(admin, tenant, action="task.erase")
    release.set()
    assert erased.status_code == 204, erased.text
    assert_problem(read, 404, "not-found")
    assert [event["resource_id"] for event in audit] == [task_id]
    assert service.state.runs.active_runs == 0


async def test_erasing_a_conversation_erases_every_turn(
    service: Service, tenant: str, other_tenant: str
) -> None:
    marker = f"marker-{uuid4().hex}"
    service.fake_llm.script(MODEL, Reply.text(f"Hi {marker}"), Reply.text("Again"))
    async with (
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
        service.client(tenant) as alice,
        service.client(other_tenant, sub="root", roles=("tenant_admin",)) as stranger,
    ):
        created = await alice.post("/api/v1/conversations", json={"metadata": {"topic": marker}})
        conversation = created.json()["id"]
        turns = []
        for words in (f"I am {marker}", "Who am I?"):
            accepted = await submit(alice, input=words, conversation_id=conversation)
            await stream(alice, accepted["task_id"])
            turns.append(accepted["task_id"])
        await service.state.runs.record_audit([])
        held_before = await _tables_holding(service, marker)

        by_member = await alice.delete(f"/api/v1/conversations/{conversation}")
        by_stranger = await stranger.delete(f"/api/v1/conversations/{conversation}")
        erased = await admin.delete(f"/api/v1/conversations/{conversation}")
        read = await alice.get(f"/api/v1/conversations/{conversation}")
        turns_read = [(await alice.get(f"/api/v1/tasks/{turn}")).status_code for turn in turns]
        new_turn = await alice.post(
            "/api/v1/tasks", json={"input": "Still there?", "conversation_id": conversation}
        )
        audit = await _audit(admin, tenant)

    assert {"conversations", "tasks", "reasoning_steps"} <= set(held_before)
    assert_problem(by_member, 403, "forbidden")
    assert_problem(by_stranger, 404, "not-found")
    assert erased.status_code == 204, erased.text
    assert_problem(read, 404, "not-found")
    assert turns_read == [404, 404]
    assert_problem(new_turn, 404, "not-found")
    assert await _tables_holding(service, marker) == {}
    about = [e for e in audit if conversation in json.dumps(e) or turns[0] in json.dumps(e)]
    assert [(e["action"], e["resource_id"]) for e in about] == [
        ("conversation.erase", conversation)
    ]
    assert about[0]["details"]["task_ids"] == turns


async def test_an_unknown_id_is_not_found(service: Service, tenant: str) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        task = await admin.delete(f"/api/v1/tasks/{uuid4()}")
        conversation = await admin.delete(f"/api/v1/conversations/{uuid4()}")
        malformed = await admin.delete("/api/v1/tasks/not-a-uuid")
    assert_problem(task, 404, "not-found")
    assert_problem(conversation, 404, "not-found")
    assert_problem(malformed, 422, "validation-error")
