"""A remote A2A agent called by our agent: the `a2a-sdk`'s own server on 127.0.0.1, registered by
card URL, its skill called as a `sub_agent` tool. Its task's streamed updates become steps of a
task and chain of its own under the call (as a sub-agent's: linked both ways, in the caller's
stream), its answer the call's result, the usage and cost it reports through our extension part
of the task's totals to the exact Decimal; cancelling our task cancels the remote one."""

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy import select

from app.storage import Database
from app.storage.tables import cost_records
from tests.api.helpers import configure, cost_of, get_json, stream, submit
from tests.api.test_remote_agents import AUTHORIZATION, base, tenant_reaching_agents
from tests.fakes.a2a_agent import ANSWER, FINAL_USAGE, STEPS, TOKEN, FakeA2AAgent
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import SSE, read_sse

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
QUESTION = "What is the answer to everything?"


@pytest.fixture
async def a2a_tenant(service: Service) -> str:
    return await tenant_reaching_agents(service)


async def registered(service: Service, tenant: str, agent: FakeA2AAgent) -> None:
    body = {"name": "fake", "card_url": agent.card_url, "headers": AUTHORIZATION}
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(base(tenant), json=body)
    assert response.status_code == 201, response.text


def the_call(events: list[SSE], tool: str) -> int:
    """Where the `tool_call` step of `tool` is in the stream."""
    [at] = [
        i
        for i, e in enumerate(events)
        if e.event == "reasoning_step"
        and e.json["step"]["type"] == "tool_call"
        and e.json["step"]["tool_call"]["tool_name"] == tool
    ]
    return at


def trail_of(events: list[SSE], call_id: str) -> list[SSE]:
    """The events of the task recording the remote task of call `call_id`, as the caller's
    stream carries them."""
    return [e for e in events if e.json.get("parent_step_id") == call_id and "depth" in e.json]


async def until_thought(client: httpx.AsyncClient, task_id: str, thought: str) -> None:
    """Follows the task's stream until a thinking step records `thought`."""
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        async for event in read_sse(response):
            step = event.json.get("step") if event.event == "reasoning_step" else None
            if step and step["type"] == "thinking" and step["thinking"]["thought"] == thought:
                return
    raise AssertionError(f"the stream ended without the thought {thought!r}")


def thoughts(trail: list[SSE]) -> list[str]:
    return [
        e.json["step"]["thinking"]["thought"]
        for e in trail
        if e.event == "reasoning_step" and e.json["step"]["type"] == "thinking"
    ]


def research_script(service: Service) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("fake__research", {"message": QUESTION}, id="c1")],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.text("The remote agent says 42.", prompt_tokens=200, completion_tokens=30),
    )


@pytest.fixture(
    params=[("JSONRPC", "HTTP+JSON"), ("HTTP+JSON", "JSONRPC")], ids=["jsonrpc", "rest"]
)
async def agent(request: pytest.FixtureRequest) -> AsyncIterator[FakeA2AAgent]:
    """The agent, its card listing JSON-RPC or HTTP+JSON first (the binding the client uses)."""
    async with FakeA2AAgent(token=TOKEN, bindings=request.param) as server:
        yield server


async def test_the_remote_tasks_updates_answer_and_usage_are_recorded(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    await registered(service, a2a_tenant, agent)
    research_script(service)

    async with service.client(a2a_tenant) as client:
        accepted = await submit(client, input="Ask the researcher.")
        events = await stream(client, accepted["task_id"])
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()

    assert events[-1].json["final_state"] == "completed"
    assert agent.messages == [QUESTION]
    binding_path = "/a2a/jsonrpc" if agent.bindings[0] == "JSONRPC" else "/a2a/rest/"
    assert all(r.path.startswith(binding_path) for r in agent.received)
    assert {r.authorization for r in agent.received} == {f"Bearer {TOKEN}"}
    at = the_call(events, "fake__research")
    call = events[at].json["step"]
    assert call["tool_call"]["tool_type"] == "sub_agent"
    assert call["tool_call"]["arguments"] == {"message": QUESTION}
    # its updates, in order, as steps of the task recording it, in our stream right after
    # the call and before its result
    trail = trail_of(events, call["id"])
    assert events[at + 1 : at + 1 + len(trail)] == trail
    assert thoughts(trail) == [
        "submitted",
        *(f"working: {step}" for step in STEPS),
        f"artifact: {ANSWER}",
        "completed",
    ]
    assert {e.json["depth"] for e in trail} == {1}
    assert trail[-1].event == "chain_completed"
    assert trail[-1].json["answer"] == ANSWER
    assert not [e for e in events if e.event == "tool_progress"]
    result = events[at + 1 + len(trail)].json["step"]["tool_result"]
    async with service.client(a2a_tenant) as client:
        recorded = await get_json(client, f"/api/v1/tasks/{result['child_task_id']}")
        recorded_chain = await get_json(client, f"/api/v1/tasks/{result['child_task_id']}/chain")
    assert recorded["remote_agent"] == "fake"
    assert recorded["agent"] is None
    assert recorded["status"] == "completed"
    assert recorded["result"] == ANSWER
    assert recorded["parent_task_id"] == accepted["task_id"]
    assert recorded["parent_step_id"] == call["id"]
    assert recorded["depth"] == 1
    assert recorded["chain_id"] == result["child_chain_id"]
    assert [s["type"] for s in recorded_chain["steps"]] == ["thinking"] * 6 + ["synthesis"]
    assert recorded_chain["parent_chain_id"] == task["chain_id"]
    # it spends nothing itself: the remote's usage is the call's, billed once, by the call
    assert Decimal(recorded["usage"]["total_cost_usd"]) == 0
    assert result["llm_calls"] == FINAL_USAGE.llm_calls
    assert result["success"] is True
    assert result["result"] == ANSWER
    assert result["input_tokens"] == FINAL_USAGE.input_tokens
    assert result["output_tokens"] == FINAL_USAGE.output_tokens
    assert Decimal(result["cost_usd"]) == FINAL_USAGE.cost_usd
    assert result["unpriced"] is False
    spent = cost_of(100, 20) + cost_of(200, 30) + FINAL_USAGE.cost_usd
    assert Decimal(task["usage"]["total_cost_usd"]) == spent
    assert task["usage"]["input_tokens"] == 100 + 200 + FINAL_USAGE.input_tokens
    assert task["usage"]["output_tokens"] == 20 + 30 + FINAL_USAGE.output_tokens
    assert Decimal(events[-2].json["metrics"]["total_cost_usd"]) == spent
    assert await remote_costs(service, accepted["task_id"]) == [
        ("fake__research", "sub_agent", FINAL_USAGE.cost_usd, 512, 96)
    ]
    assert TOKEN not in json.dumps([e.data for e in events])


async def remote_costs(service: Service, task_id: str) -> list[tuple[Any, ...]]:
    """The task's cost records of its remote calls, as stored."""
    database = Database(service.settings.resolved_database_url())
    try:
        async with database.read() as connection:
            rows = (
                await connection.execute(
                    select(
                        cost_records.c.tool_name,
                        cost_records.c.tool_type,
                        cost_records.c.cost_usd,
                        cost_records.c.input_tokens,
                        cost_records.c.output_tokens,
                    ).where(
                        cost_records.c.task_id == UUID(task_id),
                        cost_records.c.tool_type == "sub_agent",
                    )
                )
            ).all()
    finally:
        await database.dispose()
    return [tuple(row) for row in rows]


async def test_an_agent_that_does_not_stream_answers_one_blocking_message(
    service: Service, a2a_tenant: str
) -> None:
    async with FakeA2AAgent(token=TOKEN, streaming=False) as agent:
        await registered(service, a2a_tenant, agent)
        research_script(service)
        async with service.client(a2a_tenant) as client:
            accepted = await submit(client, input="Ask the researcher.")
            events = await stream(client, accepted["task_id"])

    assert events[-1].json["final_state"] == "completed"
    at = the_call(events, "fake__research")
    # One answer: the finished task.
    trail = trail_of(events, events[at].json["step"]["id"])
    assert thoughts(trail) == ["completed"]
    result = events[at + 1 + len(trail)].json["step"]["tool_result"]
    assert result["result"] == ANSWER
    assert Decimal(result["cost_usd"]) == FINAL_USAGE.cost_usd


async def test_cancelling_our_task_cancels_the_remote_task(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    await registered(service, a2a_tenant, agent)
    service.fake_llm.script(
        MODEL, Reply.tool_calls([ToolCall("fake__wait", {"message": "wait for me"}, id="c1")])
    )

    async with service.client(a2a_tenant) as client:
        accepted = await submit(client, input="Ask the researcher to wait.")
        await agent.waiting.wait()
        # The agent says it works before it waits: the cancel comes once our run recorded it.
        await until_thought(client, accepted["task_id"], "working: Waiting")
        cancelled = await client.post(f"/api/v1/tasks/{accepted['task_id']}/cancel")
        events = await stream(client, accepted["task_id"])

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    # The remote task was cancelled before our run's end was stored.
    assert agent.cancelled.is_set()
    assert len(agent.cancelled_tasks) == 1
    assert events[-1].json["final_state"] == "cancelled"
    at = the_call(events, "fake__wait")
    trail = trail_of(events, events[at].json["step"]["id"])
    assert thoughts(trail) == ["submitted", "working: Waiting"]
    assert trail[-1].event == "chain_failed"
    assert trail[-1].json["error_code"] == "cancelled"
    result = events[at + 1 + len(trail)].json["step"]["tool_result"]
    assert result["success"] is False
    assert result["error_code"] == "cancelled"
    assert result["child_task_id"] == trail[0].json["task_id"]
    assert {r.authorization for r in agent.received} == {f"Bearer {TOKEN}"}


async def call_once(service: Service, tenant: str, message: str) -> dict[str, Any]:
    """Registers a fresh agent, has the model send it `message`; the call's result."""
    async with FakeA2AAgent(token=TOKEN) as agent:
        await registered(service, tenant, agent)
        service.fake_llm.script(
            MODEL,
            Reply.tool_calls([ToolCall("fake__research", {"message": message}, id="c1")]),
            Reply.text("Noted."),
        )
        async with service.client(tenant) as client:
            accepted = await submit(client, input="Ask the researcher.")
            events = await stream(client, accepted["task_id"])
        # A failed call is an observation of the run, which goes on.
        assert events[-1].json["final_state"] == "completed"
        result: dict[str, Any] = next(
            e.json["step"]["tool_result"]
            for e in events[the_call(events, "fake__research") :]
            if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
        )
        result["remote_cancelled"] = agent.cancelled.is_set()
    return result


@pytest.mark.parametrize(
    ("message", "error", "cancelled"),
    [
        (
            "ask me first",
            "the remote agent 'fake' asks for input that this call cannot give "
            "(input_required: Which city do you mean?); its task was cancelled",
            True,
        ),
        (
            "fail now",
            "the remote agent 'fake' ended its task failed: The archive is closed.",
            False,
        ),
    ],
    ids=["input-required", "failed"],
)
async def test_a_remote_task_that_does_not_complete_fails_the_call_with_its_words(
    service: Service, a2a_tenant: str, message: str, error: str, cancelled: bool
) -> None:
    result = await call_once(service, a2a_tenant, message)

    assert result["success"] is False
    assert result["error_code"] == "tool_error"
    assert result["error"] == error
    assert result["remote_cancelled"] is cancelled


async def test_an_answer_without_reported_usage_is_a_call_of_unknown_cost(
    service: Service, a2a_tenant: str
) -> None:
    result = await call_once(service, a2a_tenant, "quiet please")

    assert result["success"] is True
    assert result["result"] == "Quietly: 42."  # its status message: it made no artifact
    assert result["unpriced"] is True
    assert result["cost_usd"] is None
    assert result["input_tokens"] is None


async def test_a_reader_sees_the_remote_tasks_steps_as_it_sees_the_call(
    service: Service, a2a_tenant: str, agent: FakeA2AAgent
) -> None:
    await configure(
        service,
        a2a_tenant,
        "visibility",
        {
            "tools": {"fake__research": "hidden"},
            "roles": {"member": {"tools": {"fake__research": "full"}}},
        },
    )
    await registered(service, a2a_tenant, agent)
    research_script(service)
    async with service.client(a2a_tenant, sub="alice", roles=("member",)) as member:
        task_id = (await submit(member, input="Ask the researcher."))["task_id"]
        seen_by_member = await stream(member, task_id)
    async with service.client(a2a_tenant, sub="alice", roles=("viewer",)) as viewer:
        seen_by_viewer = await stream(viewer, task_id)

    call = seen_by_member[the_call(seen_by_member, "fake__research")].json["step"]
    assert len(thoughts(trail_of(seen_by_member, call["id"]))) == 6
    # the viewer sees neither the call nor anything of the task recording the remote's
    assert trail_of(seen_by_viewer, call["id"]) == []
    assert not [e for e in seen_by_viewer if "depth" in e.json]
    assert not [
        e
        for e in seen_by_viewer
        if e.event == "reasoning_step"
        and (e.json["step"].get("tool_call") or {}).get("tool_name") == "fake__research"
    ]
    assert not [e for e in seen_by_viewer if any(step in e.data for step in STEPS)]
