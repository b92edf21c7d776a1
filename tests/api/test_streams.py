"""A task's live stream over a real uvicorn: order, resume, replay, many subscribers."""

import asyncio
from decimal import Decimal
from typing import Any
from uuid import UUID

import httpx
from sqlalchemy import event

from app.chain import ReasoningStep
from tests.api.helpers import (
    TWO_TOOL_TASK_COST,
    cost_of,
    script_two_tool_task,
    stream,
    submit,
)
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service
from tests.sse import SSE, collect

TWO_TOOL_STEP_TYPES = [
    ("tool_call", "llm"),
    ("tool_result", None),
    ("tool_call", "calculator"),
    ("tool_result", None),
    ("tool_call", "llm"),
    ("tool_result", None),
    ("tool_call", "current_time"),
    ("tool_result", None),
    ("tool_call", "llm"),
    ("tool_result", None),
    ("synthesis", None),
]


async def test_a_task_streams_every_event_in_order_and_its_chain_has_the_same_steps(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        accepted = await submit(client)
        assert accepted["status"] == "submitted"
        assert accepted["stream_url"] == f"/api/v1/tasks/{accepted['task_id']}/events"
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()

    types = [event.event for event in events]
    steps = len(TWO_TOOL_STEP_TYPES)
    assert types == [
        "chain_started",
        "task_status",
        *["reasoning_step"] * steps,
        "chain_completed",
        "done",
    ]
    assert [event.id for event in events] == list(range(1, steps + 5))
    assert events[1].json["state"] == "working"
    assert events[-1].json == {**events[-1].json, "final_state": "completed"}
    streamed = [ReasoningStep.model_validate(event.json["step"]) for event in events[2:-2]]
    assert [
        (s.type.value, s.tool_call.tool_name if s.tool_call else None) for s in streamed
    ] == TWO_TOOL_STEP_TYPES
    assert [s.step_number for s in streamed] == list(range(1, steps + 1))
    assert [ReasoningStep.model_validate(s) for s in chain["steps"]] == streamed
    assert chain["status"] == "completed"
    completed_metrics = events[-2].json["metrics"]
    assert Decimal(completed_metrics["total_cost_usd"]) == TWO_TOOL_TASK_COST
    assert chain["metrics"] == completed_metrics
    assert task["status"] == "completed"
    assert task["result"] == "17 * 23 + 4 = 395."
    assert Decimal(task["usage"]["total_cost_usd"]) == TWO_TOOL_TASK_COST
    assert task["usage"]["llm_calls"] == 3


async def test_accept_event_stream_on_submit_answers_with_the_stream_itself(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)
    async with (
        service.client(tenant) as client,
        client.stream(
            "POST",
            "/api/v1/tasks",
            json={"input": "What is 17 * 23 + 4?"},
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = await collect(response)
    assert events[0].event == "chain_started"
    assert response.headers["location"] == f"/api/v1/tasks/{events[0].json['task_id']}"
    assert events[-1].event == "done"
    assert [event.id for event in events] == list(range(1, len(events) + 1))


async def test_reconnecting_with_last_event_id_resumes_with_no_gap_and_no_duplicate(
    service: Service, tenant: str
) -> None:
    # The final answer waits, so the first connection leaves while the run is live.
    script_two_tool_task(service.fake_llm, answer_delay_s=0.3)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            first = await collect(response, stop_after=5)
        second = await stream(client, task_id, headers={"Last-Event-ID": str(first[-1].id)})
        by_query = await stream_after(client, task_id, 7)
    ids = [event.id for event in first + second]
    assert ids == list(range(1, len(ids) + 1))
    assert second[-1].event == "done"
    assert [event.id for event in by_query] == list(range(8, len(ids) + 1))


async def stream_after(client: httpx.AsyncClient, task_id: str, after: int) -> list[SSE]:
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events?after={after}") as r:
        return await collect(r)


async def test_a_subscriber_joining_after_the_end_gets_the_full_replay(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        live = await stream(client, task_id)
        replay = await stream(client, task_id)
    assert [(e.id, e.event) for e in replay] == [(e.id, e.event) for e in live]
    assert [e.json for e in replay] == [e.json for e in live]


async def test_every_subscriber_gets_every_event_and_leaving_cancels_nothing(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm, answer_delay_s=0.2)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as leaving:
            await collect(leaving, stop_after=3)
        streams = await asyncio.gather(*(stream(client, task_id) for _ in range(4)))
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
    assert task["status"] == "completed"
    for events in streams:
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert events[-1].json["final_state"] == "completed"


async def test_a_client_that_has_every_event_of_a_finished_task_gets_204(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        events = await stream(client, task_id)
        response = await client.get(
            f"/api/v1/tasks/{task_id}/events", headers={"Last-Event-ID": str(events[-1].id)}
        )
        one_before = await stream(client, task_id, headers={"Last-Event-ID": str(events[-2].id)})
    # 204 is what makes an EventSource stop reconnecting.
    assert response.status_code == 204
    assert response.content == b""
    assert [e.event for e in one_before] == ["done"]


async def test_a_task_live_here_is_followed_without_reading_it_from_the_store(
    service: Service, tenant: str, other_tenant: str
) -> None:
    # What the client following the task it has just submitted costs: its task is not read
    # again (its run, live here, knows its tenant and chain); another tenant still gets 404.
    gate = asyncio.Event()
    service.fake_llm.script(MODEL, Reply.text("ok", gate=gate))
    task_reads: list[str] = []
    forms: tuple[str, ...] = ()

    def read(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        # Reads of this task only: other tests' runs may read theirs meanwhile.
        named = any(form in str(parameters) for form in forms)
        if named and statement.lstrip().upper().startswith("SELECT") and "FROM tasks" in statement:
            task_reads.append(statement)

    engine = service.state.database.engine.sync_engine
    async with service.client(tenant) as client, service.client(other_tenant) as other:
        task_id = (await submit(client))["task_id"]
        forms = (task_id, UUID(task_id).hex)  # as Postgres and SQLite are sent it
        await service.fake_llm.wait_for_requests(1, MODEL)  # its run is live, its call held
        event.listen(engine, "before_cursor_execute", read)
        try:
            async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
                assert response.status_code == 200
                first = await collect(response, stop_after=2)
            foreign = await other.get(f"/api/v1/tasks/{task_id}/events")
        finally:
            event.remove(engine, "before_cursor_execute", read)
        gate.set()
        events = await stream(client, task_id, headers={"Last-Event-ID": str(first[-1].id)})
    assert [e.event for e in first] == ["chain_started", "task_status"]
    assert foreign.status_code == 404
    assert foreign.headers["content-type"] == "application/problem+json"
    # The other tenant's request is the one read of the task (and finds nothing).
    assert len(task_reads) == 1
    assert events[-1].json["final_state"] == "completed"
    assert [e.id for e in first + events] == list(range(1, len(first) + len(events) + 1))


async def test_many_concurrent_runs_are_each_stored_and_streamed_whole(
    service: Service, tenant: str
) -> None:
    # One writer stores whatever all runs produced while the previous commit ran.
    service.fake_llm.always(MODEL, Reply.text("done", prompt_tokens=10, completion_tokens=5))
    async with service.client(tenant) as client:
        accepted = await asyncio.gather(*(submit(client) for _ in range(20)))
        streams = await asyncio.gather(*(stream(client, a["task_id"]) for a in accepted))
        chains = await asyncio.gather(
            *(client.get(f"/api/v1/chains/{a['chain_id']}") for a in accepted)
        )
        tasks = (await client.get("/api/v1/tasks", params={"limit": 50})).json()["items"]
    for events, chain in zip(streams, chains, strict=True):
        assert [e.id for e in events] == list(range(1, 8))
        assert [e.event for e in events][-2:] == ["chain_completed", "done"]
        assert [s["step_number"] for s in chain.json()["steps"]] == [1, 2, 3]
    assert len(tasks) == 20
    assert {t["status"] for t in tasks} == {"completed"}
    assert {Decimal(t["usage"]["total_cost_usd"]) for t in tasks} == {cost_of(10, 5)}
