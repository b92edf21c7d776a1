"""Cancelling a run: prompt even mid-call, partial chain and cost kept, 409 once finished or
when another live instance runs it (only a run's owner writes its events)."""

import asyncio
import time
from decimal import Decimal
from uuid import UUID

from sqlalchemy import select, text

from app.storage import Database
from app.storage.tables import cost_records
from app.storage.tasks import TaskRepository
from tests.api.helpers import assert_problem, cost_of, script_two_tool_task, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


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
