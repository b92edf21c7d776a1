"""A task that keeps failing to start or end is not claimed again and again: each failure
holds it back from the queue a while longer, and after the last it ends `failed`, saying so,
with its stream closed by `done` — without its run being started once more."""

from uuid import uuid4

from sqlalchemy import update

from app.chain import ChainMetrics, ChainStatus, TaskState
from app.chain.models import utc_now
from app.runs.starter import MAX_FAILURES
from app.storage.notify import QUEUE
from app.storage.tables import tasks
from app.storage.types import RawJSON
from tests.api.helpers import stream
from tests.service import Service


async def test_a_task_that_failed_too_often_ends_failed_saying_so(
    service: Service, tenant: str
) -> None:
    stores = service.state.run_stores
    task_id, chain_id, now = uuid4(), uuid4(), utc_now()
    await stores.queue.create(
        {
            "id": task_id,
            "tenant_id": tenant,
            "user_id": "alice",
            "status": TaskState.WORKING,
            "chain_id": chain_id,
            "request": {"input": "x"},
            "model": "fake-model",
            "last_seq": 0,
            "runner_id": "a-runner-that-gave-it-back",
            "created_at": now,
        },
        {
            "id": chain_id,
            "task_id": task_id,
            "tenant_id": tenant,
            "agent_id": "default",
            "status": ChainStatus.THINKING,
            "metrics": RawJSON(ChainMetrics().model_dump_json()),
            "started_at": now,
        },
    )
    async with stores.database.transaction() as connection:  # as its last failure left it
        await connection.execute(
            update(tasks)
            .where(tasks.c.id == task_id)
            .values(runner_id=None, failures=MAX_FAILURES, claimable_at=now)
        )
    stores.notices.deliver(QUEUE, "")
    async with service.client(tenant, sub="alice") as client:
        events = await stream(client, str(task_id))
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        chain = (await client.get(f"/api/v1/tasks/{task_id}/chain")).json()
    assert [event.event for event in events] == ["chain_failed", "done"]
    assert events[-1].json["final_state"] == "failed"
    assert task["status"] == "failed"
    assert task["error_code"] == "internal_error"
    assert f"it failed {MAX_FAILURES} times" in task["error_message"]
    assert chain["steps"] == []  # its run was not started again
