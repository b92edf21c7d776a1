"""A family of runs survives its instance: a parent and the sub-agent it waits for, killed with
their instance, are resumed together by another one from their stored steps, making no stored
call again."""

import asyncio
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from app.storage.records import TaskRecord
from tests.api.helpers import stream, submit
from tests.api.test_cluster import FAST_LEASE, assert_whole, follow_until
from tests.api.test_remote_agents import AUTHORIZATION, SECRET
from tests.cluster import cluster, same_conversation
from tests.fakes.a2a_agent import TOKEN, FakeA2AAgent
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, running_service, service_settings
from tests.sse import SSE

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)


def _calls(events: list[SSE]) -> list[str]:
    return [
        e.json["step"]["tool_call"]["tool_name"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_call"
    ]


def _resumes(events: list[SSE]) -> int:
    return len([e for e in events if e.event == "task_status" and e.json.get("resumed")])


async def test_killing_the_instance_mid_child_resumes_the_family_with_no_call_repeated(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__worker", {"task": "Compute 6 * 7."}, id="w1")]),
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"}, id="c1")]),
        Reply.text("never sent", delay_s=60),  # the worker's answer, when its instance dies
        Reply.text("6 * 7 = 42."),
        Reply.text("The worker says 42."),
    )
    async with cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        async with a.client(group.token_for("root", ("tenant_admin",))) as admin:
            for body in (
                {"name": "worker", "tools": ["calculator"]},
                {"name": "lead", "tools": ["agent:worker"]},
            ):
                created = await admin.post("/api/v1/agents", json=body)
                assert created.status_code == 201, created.text
        async with a.client(group.token) as on_a:
            parent_id = (await submit(on_a, agent="lead"))["task_id"]
            await fake_llm.wait_for_requests(3)  # the worker's second call is under way
            listed = (await on_a.get("/api/v1/tasks?limit=10")).json()["items"]
            [worker] = [t for t in listed if t["parent_task_id"] == parent_id]
            # The worker's steps through its second call's are stored (as the stream shows)
            seen: list[SSE] = []
            await follow_until(on_a, worker["id"], 7, seen)
            assert seen[-1].json["step"]["tool_call"]["tool_name"] == "llm"
        await a.kill()
        async with b.client(group.token) as client:
            events = await stream(client, parent_id)
            parent = (await client.get(f"/api/v1/tasks/{parent_id}")).json()
            chain = (await client.get(f"/api/v1/tasks/{parent_id}/chain")).json()
            [result] = [
                s["tool_result"]
                for s in chain["steps"]
                if s["tool_result"] is not None and s["tool_result"]["tool_type"] == "sub_agent"
            ]
            child_id = result["child_task_id"]
            child_events = await stream(client, child_id)
            child: dict[str, Any] = (await client.get(f"/api/v1/tasks/{child_id}")).json()
        rows = await group.task_rows()

    assert_whole(events, "completed")
    assert_whole(child_events, "completed")
    assert parent["result"] == "The worker says 42."
    assert child["result"] == "6 * 7 = 42."
    assert result["result"] == "6 * 7 = 42."
    # both runs were resumed once, each from its own stored steps; the parent's stream
    # carries its child's events, the child's resume among them
    own = [e for e in events if "depth" not in e.json]
    relayed = [e for e in events if e.json.get("depth") == 1]
    assert _resumes(own) == 1
    assert _resumes(child_events) == 1
    assert _resumes(relayed) == 1
    assert {e.json["task_id"] for e in relayed} == {child_id}
    assert _calls(own) == ["llm", "agent__worker", "llm"]
    assert _calls(child_events) == ["llm", "calculator", "llm"]
    # one child: the resumed call found the task it had started
    assert [str(r.id) for r in rows if r.parent_task_id is not None] == [child_id]
    requests = fake_llm.requests_for(MODEL)
    assert len(requests) == 5
    lead_first, worker_first, in_flight, again, lead_last = (r.body["messages"] for r in requests)
    assert same_conversation(in_flight, again), "only the call in flight was made again"
    assert not same_conversation(lead_first, worker_first)
    assert not same_conversation(worker_first, in_flight)
    assert lead_last[-1]["role"] == "tool"
    # one cost record per call made to completion, each billed to the task that made it
    assert len(await group.cost_rows(parent_id)) == 2
    assert len(await group.cost_rows(child_id)) == 2


async def test_a_child_claimed_to_be_resumed_is_held_by_its_instance_while_its_run_starts(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """The lease check of the instance that resumes a family, made while the child it has
    just claimed is being started (its stored start being read), leaves the child to it: a
    task claimed here is held before its run is live. (Before, the check gave the child back
    as a run this instance had lost, and a second run of it made its call again.)"""
    held = asyncio.Event()  # the worker's answer, when the first instance stops
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__worker", {"task": "Compute 6 * 7."}, id="w1")]),
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"}, id="c1")]),
        Reply.text("never sent", gate=held),
        Reply.text("6 * 7 = 42."),
        Reply.text("The worker says 42."),
    )
    settings = service_settings(tmp_path, own_database_url, fake_llm, shutdown_grace_s=0.2)
    checks: list[tuple[Any, str, int, str | None]] = []
    async with running_service(settings, fake_llm) as b:
        runs = b.state.runs
        starter = runs._starter
        load = starter._loader
        assert load is not None

        async def load_after_a_lease_check(task: TaskRecord) -> Any:
            """The real load, with a lease check made first (at each task's first load):
            it runs while the task is claimed here and not yet live."""
            if any(task.id == checked for checked, *_ in checks):
                return await load(task)
            given_back = await runs.leases.recover()
            current = await b.state.runs._stores.queue.task(task.id)
            assert current is not None
            role = "child" if task.parent_task_id else "parent"
            checks.append((task.id, role, given_back, current.runner_id))
            return await load(task)

        starter._loader = load_after_a_lease_check
        tenant = await b.create_tenant(f"t-family-{uuid4().hex[:8]}")
        async with running_service(settings, fake_llm) as a:
            async with a.client(tenant, roles=("tenant_admin",)) as admin:
                for body in (
                    {"name": "worker", "tools": ["calculator"]},
                    {"name": "lead", "tools": ["agent:worker"]},
                ):
                    created = await admin.post("/api/v1/agents", json=body)
                    assert created.status_code == 201, created.text
            async with a.client(tenant) as on_a:
                parent_id = (await submit(on_a, agent="lead"))["task_id"]
                await fake_llm.wait_for_requests(3)  # the worker's answer is awaited
        # a stopped (its runs handed over): b resumes the parent, which resumes its child
        held.set()
        async with b.client(tenant) as client:
            events = await stream(client, parent_id)

    assert_whole(events, "completed")
    assert events[-2].json["answer"] == "The worker says 42."
    me = runs.runner_id
    assert [check[1:] for check in checks] == [("parent", 0, me), ("child", 0, me)]
    # the call cut by the hand-over was made again once, and nothing else
    assert len(fake_llm.requests_for(MODEL)) == 5


async def test_a_remote_agents_record_left_by_a_killed_instance_ends_when_its_parent_resumes(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("fake__wait", {"message": "wait for me"}, id="w1")]),
        Reply.text("The remote agent did not answer."),
    )
    async with (
        FakeA2AAgent(token=TOKEN) as agent,
        cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group,
    ):
        a = await group.instance("a")
        b = await group.instance("b")
        tenant = group.tenant
        async with a.client(group.token_for("ops", ("platform_admin",))) as platform:
            opened = await platform.put(
                f"/api/v1/tenants/{tenant}/network", json={"platform_allow": ["127.0.0.1/32"]}
            )
            assert opened.status_code == 200, opened.text
        async with a.client(group.token_for("root", ("tenant_admin",))) as admin:
            for method, path, body in (
                ("PUT", f"secrets/{SECRET}", {"value": TOKEN}),
                (
                    "POST",
                    "remote-agents",
                    {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION},
                ),
            ):
                answer = await admin.request(method, f"/api/v1/tenants/{tenant}/{path}", json=body)
                assert answer.status_code in (200, 201), answer.text
        async with a.client(group.token) as on_a:
            parent_id = (await submit(on_a, input="Ask the remote agent."))["task_id"]
            await agent.waiting.wait()
            listed = (await on_a.get("/api/v1/tasks?limit=10")).json()["items"]
            [record] = [t for t in listed if t["parent_task_id"] == parent_id]
            # its first update is stored as a step (chain_started, working, the thought)
            seen: list[SSE] = []
            await follow_until(on_a, record["id"], 3, seen)
            assert seen[-1].json["step"]["thinking"]["thought"] == "submitted"
        await a.kill()
        async with b.client(group.token) as client:
            events = await stream(client, parent_id)
            record = (await client.get(f"/api/v1/tasks/{record['id']}")).json()
            record_events = await stream(client, record["id"])

    assert_whole(events, "completed")
    assert record["remote_agent"] == "fake"
    assert record["status"] == "failed"
    assert record["error_code"] == "interrupted"
    assert record_events[-1].json["final_state"] == "failed"
    own = [e for e in events if "depth" not in e.json]
    [result] = [
        e.json["step"]["tool_result"]
        for e in own
        if e.event == "reasoning_step"
        and e.json["step"]["type"] == "tool_result"
        and e.json["step"]["tool_result"]["tool_name"] == "fake__wait"
    ]
    assert result["success"] is False  # the remote call is not made again
    assert len(agent.messages) == 1
    assert len(fake_llm.requests_for(MODEL)) == 2
