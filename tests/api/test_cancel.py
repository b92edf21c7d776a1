"""Cancelling a run: prompt even mid-call, partial chain and cost kept, 409 once finished or
when another live instance runs it (only a run's owner writes its events)."""

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from uuid import UUID, uuid4

from sqlalchemy import select, text

from app.storage import Database
from app.storage.tables import cost_records
from app.storage.tasks import TaskRepository
from tests.api.helpers import assert_problem, cost_of, script_two_tool_task, stream, submit
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, running_service, service_settings


async def test_cancel_during_a_slow_llm_call_ends_the_run_within_half_a_second(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "2 + 2"})], prompt_tokens=40, completion_tokens=8
        ),
        Reply.text("too late", delay_s=30),
    )
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        await fake.wait_for_requests(2)  # the second LLM call is in flight
        started = time.perf_counter()
        response = await client.post(f"/api/v1/tasks/{task_id}/cancel")
        elapsed = time.perf_counter() - started
        events = await stream(client, task_id)
        chain = (await client.get(f"/api/v1/tasks/{task_id}/chain")).json()

    assert response.status_code == 200, response.text
    assert elapsed < 0.5
    task = response.json()
    assert task["status"] == "cancelled"
    assert task["error_code"] == "cancelled"
    assert events[-2].event == "chain_failed"
    assert events[-2].json["error_code"] == "cancelled"
    assert events[-1].event == "done"
    assert events[-1].json["final_state"] == "cancelled"
    kept = cost_of(40, 8)
    assert Decimal(task["usage"]["total_cost_usd"]) == kept
    assert Decimal(events[-2].json["metrics"]["total_cost_usd"]) == kept
    assert chain["status"] == "cancelled"
    # The steps so far are kept; the interrupted LLM call is a failed, cancelled result.
    last = chain["steps"][-1]
    assert last["type"] == "tool_result"
    assert last["tool_result"]["error_code"] == "cancelled"
    assert len(chain["steps"]) == len(events) - 4
    database = Database(service.settings.resolved_database_url())
    try:
        async with database.read() as connection:
            rows = (
                await connection.execute(
                    select(cost_records.c.cost_usd, cost_records.c.tenant_id).where(
                        cost_records.c.task_id == UUID(task["id"])
                    )
                )
            ).all()
    finally:
        await database.dispose()
    assert [(row.cost_usd, row.tenant_id) for row in rows] == [(kept, tenant)]


async def test_cancelling_a_finished_task_is_a_conflict(service: Service, tenant: str) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        await stream(client, task_id)
        response = await client.post(f"/api/v1/tasks/{task_id}/cancel")
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
    body = assert_problem(response, 409, "task-finished")
    assert "completed" in body["detail"]
    assert task["status"] == "completed"


async def test_a_cancel_that_loses_the_race_to_the_runs_end_says_so(
    service: Service, tenant: str
) -> None:
    """The run has reached its end, not yet stored, when the cancel comes: the cancel does not
    pretend to have stopped it (the route answers 409 `task-finished` for it)."""
    state = service.state
    answer = asyncio.Event()  # the model answers only once the writer is held back
    service.fake_llm.script(MODEL, Reply.text("done before the cancel", gate=answer))
    async with service.client(tenant) as client:
        task_id = UUID((await submit(client))["task_id"])
    async with state.database.read() as connection:
        task = await TaskRepository(connection, tenant).get(task_id)
    assert task is not None
    run = state.runs.run(task_id)
    assert run is not None
    # Hold the writer back: on SQLite by holding its one connection, on Postgres by a lock
    # that keeps the writer from inserting the run's events.
    async with state.database.transaction() as blocking:
        if not state.database.is_sqlite:
            await blocking.execute(text("LOCK TABLE task_events IN EXCLUSIVE MODE"))
        answer.set()
        await run.wait()  # the run has ended; its end waits for the writer
        cancelling = asyncio.ensure_future(state.runs.cancel(task, "cancelled by alice"))
    stopped = await cancelling

    assert stopped is False
    async with service.client(tenant) as client:
        after = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        refused = await client.post(f"/api/v1/tasks/{task_id}/cancel")
    assert after["status"] == "completed"
    assert after["result"] == "done before the cancel"
    assert_problem(refused, 409, "task-finished")


async def test_a_replica_that_does_not_run_a_task_refuses_to_cancel_it_and_writes_nothing(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    one_dir, two_dir = service_dir / "one", service_dir / "two"
    one_dir.mkdir()
    two_dir.mkdir()
    tenant = f"x-{uuid4().hex[:12]}"
    fake_llm.script(MODEL, Reply.text("slow", delay_s=30))
    async with (
        running_service(service_settings(one_dir, database_url, fake_llm), fake_llm) as one,
        running_service(service_settings(two_dir, database_url, fake_llm), fake_llm) as two,
    ):
        await one.create_tenant(tenant)
        async with one.client(tenant) as owner, two.client(tenant) as other:
            task_id = (await submit(owner))["task_id"]
            await fake_llm.wait_for_requests(1)  # the run is in its LLM call, on `one`
            refused = await other.post(f"/api/v1/tasks/{task_id}/cancel")
            still = (await other.get(f"/api/v1/tasks/{task_id}")).json()
            cancelled = await owner.post(f"/api/v1/tasks/{task_id}/cancel")
            events = await stream(other, task_id)

    problem = assert_problem(refused, 409, "task-running-elsewhere")
    assert problem["runner"] == one.state.runs.runner_id
    assert still["status"] == "working"
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    # One writer wrote the stream: gap-free ids, one end, the owner's cancel.
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert [e.event for e in events].count("done") == 1
    assert events[-1].json["final_state"] == "cancelled"
    assert events[-2].json["error_code"] == "cancelled"
