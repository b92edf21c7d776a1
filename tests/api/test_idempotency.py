"""Idempotent submission: `Idempotency-Key` on `POST /api/v1/tasks` over the real service on
both databases. Tasks run on the offline `demo` model, so no scripted reply is needed."""

import asyncio
from typing import Any
from uuid import UUID, uuid4

import httpx
from sqlalchemy import update

from app.chain.models import utc_now
from app.storage.tables import idempotency_keys
from tests.api.helpers import assert_problem
from tests.service import Service
from tests.sse import collect

BODY = {"input": "What is 17 * 23 + 4?", "model": "demo"}


async def post(
    client: httpx.AsyncClient, key: str, body: dict[str, Any] | None = None
) -> httpx.Response:
    return await client.post("/api/v1/tasks", json=body or BODY, headers={"Idempotency-Key": key})


async def until_done(client: httpx.AsyncClient, task_id: str) -> None:
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        assert response.status_code in (200, 204)
        await response.aread()


async def task_ids(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/api/v1/tasks", params={"limit": 200})
    assert response.status_code == 200, response.text
    return [task["id"] for task in response.json()["items"]]


async def test_twenty_concurrent_identical_submissions_make_one_task(
    service: Service, tenant: str
) -> None:
    key = str(uuid4())
    async with service.client(tenant) as client:
        answers = await asyncio.gather(*(post(client, key) for _ in range(20)))

        assert [a.status_code for a in answers] == [202] * 20, [a.text for a in answers]
        ids = {a.json()["task_id"] for a in answers}
        assert len(ids) == 1
        [task_id] = ids
        assert {a.json()["chain_id"] for a in answers} == {answers[0].json()["chain_id"]}
        assert {a.headers["location"] for a in answers} == {f"/api/v1/tasks/{task_id}"}
        # One answer made it; every other one says it is a repeat.
        fresh = [a for a in answers if "idempotent-replayed" not in a.headers]
        assert len(fresh) == 1
        assert all(
            a.headers.get("idempotent-replayed") == "true" for a in answers if a not in fresh
        )
        await until_done(client, task_id)
        assert await task_ids(client) == [task_id]


async def test_a_repeat_later_names_the_same_task_in_its_current_state(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        first = await post(client, "order-1")
        assert first.status_code == 202, first.text
        task_id = first.json()["task_id"]
        await until_done(client, task_id)

        again = await post(client, "order-1", {**BODY, "metadata": {}})

        assert again.status_code == 202, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["task_id"] == task_id
        assert again.json()["status"] == "completed"
        assert await task_ids(client) == [task_id]


async def test_the_same_key_with_another_body_is_refused(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        first = await post(client, "k-1")
        assert first.status_code == 202, first.text

        changed = await post(client, "k-1", {**BODY, "input": "What is 2 + 2?"})

        body = assert_problem(changed, 422, "idempotency-key-reused")
        assert body["errors"][0]["field"] == "header.Idempotency-Key"
        await until_done(client, first.json()["task_id"])
        assert await task_ids(client) == [first.json()["task_id"]]


async def test_keys_belong_to_their_tenant_and_caller(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with (
        service.client(tenant) as alice,
        service.client(tenant, sub="bob") as bob,
        service.client(other_tenant) as elsewhere,
    ):
        mine = await post(alice, "shared-key")
        bobs = await post(bob, "shared-key")
        theirs = await post(elsewhere, "shared-key")

        for answer in (mine, bobs, theirs):
            assert answer.status_code == 202, answer.text
            assert "idempotent-replayed" not in answer.headers
        ids = {a.json()["task_id"] for a in (mine, bobs, theirs)}
        assert len(ids) == 3
        await until_done(alice, mine.json()["task_id"])
        await until_done(bob, bobs.json()["task_id"])
        await until_done(elsewhere, theirs.json()["task_id"])
        assert await task_ids(elsewhere) == [theirs.json()["task_id"]]


async def test_an_expired_key_may_be_used_again(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        first = await post(client, "daily-report")
        assert first.status_code == 202, first.text
        await until_done(client, first.json()["task_id"])
        # Its 24 hours are over (the clock moved on).
        async with service.state.database.transaction() as connection:
            await connection.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.task_id == UUID(first.json()["task_id"]))
                .values(expires_at=utc_now())
            )

        second = await post(client, "daily-report", {**BODY, "input": "What is 2 + 2?"})

        assert second.status_code == 202, second.text
        assert "idempotent-replayed" not in second.headers
        assert second.json()["task_id"] != first.json()["task_id"]
        await until_done(client, second.json()["task_id"])
        repeat = await post(client, "daily-report", {**BODY, "input": "What is 2 + 2?"})
        assert repeat.json()["task_id"] == second.json()["task_id"]


async def test_a_streamed_repeat_streams_the_first_task(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        headers = {"Idempotency-Key": "stream-1", "Accept": "text/event-stream"}
        async with client.stream("POST", "/api/v1/tasks", json=BODY, headers=headers) as first:
            assert first.status_code == 200
            first_events = await collect(first)
            location = first.headers["location"]

        async with client.stream("POST", "/api/v1/tasks", json=BODY, headers=headers) as again:
            assert again.status_code == 200
            assert again.headers["location"] == location
            assert again.headers["idempotent-replayed"] == "true"
            again_events = await collect(again)

        assert [e.event for e in again_events] == [e.event for e in first_events]
        assert again_events[-1].json["final_state"] == "completed"
        assert len(await task_ids(client)) == 1


async def test_a_key_that_is_not_visible_ascii_is_refused(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        for key in ("x" * 256, "two words"):
            answer = await post(client, key)
            body = assert_problem(answer, 422, "validation-error")
            assert body["errors"][0]["field"] == "header.Idempotency-Key"
        assert await task_ids(client) == []
