"""Schedules firing: two schedulers with an injected clock on one database, racing each tick
as two instances do, fire each firing exactly once through the real submission path; overlap
is skipped and counted; paused and deleted schedules do not fire; missed firings fire once;
a started scheduler sleeps until it is told of a change. Both databases, on a service of
their own whose own scheduler is off (its clock is the real one)."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy import update

from app.resources.schedules import Scheduler, ScheduleRecord, ScheduleStore
from app.storage import Database
from app.storage.notify import SCHEDULES
from app.storage.tables import schedules
from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import MODEL, Service, checked, running_service, service_settings

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
DEMO_TASK = {"input": "What is 17 * 23 + 4?", "model": "demo"}
MINUTE = timedelta(minutes=1)


class Clock:
    """The time the schedulers fire by; the test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def quiet(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    settings = service_settings(tmp_path, own_database_url, fake_llm, scheduler=False)
    async with running_service(settings, fake_llm) as service, checked(service):
        yield service


@pytest.fixture
async def tenant_of(quiet: Service) -> str:
    return await quiet.create_tenant("t-schedules")


def instances(service: Service, clock: Clock) -> tuple[list[Scheduler], list[Database]]:
    """Two schedulers as two instances have them: each with a database engine of its own."""
    url = service.settings.database_url
    assert url is not None
    databases = [Database(url), Database(url)]
    fire = service.state.schedule_firings.fire
    return [Scheduler(ScheduleStore(db), fire, clock=clock) for db in databases], databases


async def race(schedulers: list[Scheduler]) -> int:
    """Both instances tick at once; how many firings they claimed in all."""
    return sum(await asyncio.gather(*(s.tick() for s in schedulers)))


async def make(client: httpx.AsyncClient, task: dict[str, Any] = DEMO_TASK) -> dict[str, Any]:
    body = {"name": "Every minute", "cron": "* * * * *", "task": task}
    response = await client.post("/api/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def read(client: httpx.AsyncClient, schedule_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/v1/schedules/{schedule_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def made(client: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/schedules/{schedule_id}/tasks")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def until_done(client: httpx.AsyncClient, task_id: str) -> None:
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        assert response.status_code in (200, 204)
        await response.aread()


async def test_every_minute_fires_once_per_minute_across_two_instances(
    quiet: Service, tenant_of: str
) -> None:
    async with quiet.client(tenant_of) as alice:
        schedule = await make(alice)
        first = datetime.fromisoformat(schedule["next_fire_at"])
        clock = Clock(first + timedelta(seconds=1))
        schedulers, databases = instances(quiet, clock)
        try:
            assert await race(schedulers) == 1
            await until_done(alice, (await read(alice, schedule["id"]))["last_task_id"])
            for minute in range(1, 5):
                clock.now = first + minute * MINUTE + timedelta(seconds=1)
                assert await race(schedulers) == 1, f"minute {minute}"
                # The same minute again: nothing more.
                assert await race(schedulers) == 0
                await until_done(alice, (await read(alice, schedule["id"]))["last_task_id"])
            # Down for ten minutes: the missed firings make one task, not ten.
            clock.now = first + 15 * MINUTE + timedelta(seconds=1)
            assert await race(schedulers) == 1
            await until_done(alice, (await read(alice, schedule["id"]))["last_task_id"])
        finally:
            for database in databases:
                await database.dispose()

        after = await read(alice, schedule["id"])
        tasks = await made(alice, schedule["id"])
        listed = await alice.get("/api/v1/tasks", params={"schedule_id": schedule["id"]})
        one = await alice.get(f"/api/v1/tasks/{tasks[0]['id']}")

    assert (after["fired_count"], after["skipped_count"]) == (6, 0)
    # The missed firing is made once, late, as the one that was due first.
    assert datetime.fromisoformat(after["last_fired_at"]) == first + 5 * MINUTE
    assert datetime.fromisoformat(after["next_fire_at"]) == first + 16 * MINUTE
    assert len(tasks) == 6
    assert {t["status"] for t in tasks} == {"completed"}
    assert {t["schedule_id"] for t in tasks} == {schedule["id"]}
    assert {t["user_id"] for t in tasks} == {"alice"}
    assert [t["id"] for t in listed.json()["items"]] == [t["id"] for t in tasks]
    assert one.json()["schedule_id"] == schedule["id"]
    assert after["last_task_id"] == tasks[0]["id"]


async def test_a_firing_while_the_last_task_runs_is_skipped_and_counted(
    quiet: Service, tenant_of: str
) -> None:
    gate = asyncio.Event()
    quiet.fake_llm.script(MODEL, Reply.text("first", gate=gate), Reply.text("second"))
    async with quiet.client(tenant_of) as alice:
        schedule = await make(alice, {"input": "Report.", "model": MODEL})
        first = datetime.fromisoformat(schedule["next_fire_at"])
        clock = Clock(first)
        schedulers, databases = instances(quiet, clock)
        try:
            assert await race(schedulers) == 1
            running = (await read(alice, schedule["id"]))["last_task_id"]
            await quiet.fake_llm.wait_for_requests(1)
            clock.now = first + MINUTE
            assert await race(schedulers) == 1
            skipped = await read(alice, schedule["id"])
            assert (skipped["fired_count"], skipped["skipped_count"]) == (1, 1)
            assert datetime.fromisoformat(skipped["last_skipped_at"]) == first + MINUTE
            assert skipped["last_task_id"] == running

            gate.set()
            await until_done(alice, running)
            clock.now = first + 2 * MINUTE
            assert await race(schedulers) == 1
            after = await read(alice, schedule["id"])
            await until_done(alice, after["last_task_id"])
        finally:
            for database in databases:
                await database.dispose()
        tasks = await made(alice, schedule["id"])

    assert (after["fired_count"], after["skipped_count"]) == (2, 1)
    assert [t["result"] for t in tasks] == ["second", "first"]


async def test_paused_and_deleted_schedules_do_not_fire(quiet: Service, tenant_of: str) -> None:
    async with quiet.client(tenant_of) as alice:
        schedule = await make(alice)
        one = f"/api/v1/schedules/{schedule['id']}"
        first = datetime.fromisoformat(schedule["next_fire_at"])
        clock = Clock(first + timedelta(seconds=1))
        schedulers, databases = instances(quiet, clock)
        try:
            await alice.post(f"{one}/pause")
            assert await race(schedulers) == 0
            clock.now += 5 * MINUTE
            assert await race(schedulers) == 0
            assert await made(alice, schedule["id"]) == []

            resumed = (await alice.post(f"{one}/resume")).json()
            clock.now = datetime.fromisoformat(resumed["next_fire_at"])
            assert await race(schedulers) == 1
            [task] = await made(alice, schedule["id"])
            await until_done(alice, task["id"])

            assert (await alice.delete(one)).status_code == 204
            clock.now += 10 * MINUTE
            assert await race(schedulers) == 0
        finally:
            for database in databases:
                await database.dispose()
        # Its tasks stay, tagged with it.
        listed = await alice.get("/api/v1/tasks", params={"schedule_id": schedule["id"]})

    assert [t["id"] for t in listed.json()["items"]] == [task["id"]]


async def test_a_refused_firing_is_recorded_on_the_schedule(quiet: Service, tenant_of: str) -> None:
    async with quiet.client(tenant_of, **ADMIN) as admin:
        agent = await admin.post("/api/v1/agents", json={"name": "digest"})
        assert agent.status_code == 201, agent.text
        schedule = await make(admin, {**DEMO_TASK, "agent": "digest"})
        assert (await admin.delete("/api/v1/agents/digest")).status_code == 204
        first = datetime.fromisoformat(schedule["next_fire_at"])
        schedulers, databases = instances(quiet, Clock(first))
        try:
            assert await race(schedulers) == 1
        finally:
            for database in databases:
                await database.dispose()
        after = await read(admin, schedule["id"])

    assert after["fired_count"] == 0
    assert "archived" in after["last_error"]
    assert datetime.fromisoformat(after["last_error_at"]) == first
    assert datetime.fromisoformat(after["next_fire_at"]) == first + MINUTE


async def test_a_stored_cron_with_no_firing_in_sight_fires_once_and_is_paused(
    quiet: Service, tenant_of: str
) -> None:
    """A schedule stored before such expressions were refused: only when 29 February is a
    Friday (2036, then 2064). Its firing is made; the next is too far away to wait for."""
    async with quiet.client(tenant_of) as alice:
        schedule = await make(alice)
        leap_friday = datetime(2036, 2, 29, tzinfo=UTC)
        async with quiet.state.database.transaction() as connection:
            await connection.execute(
                update(schedules)
                .where(schedules.c.id == UUID(schedule["id"]))
                .values(cron="0 0 * 2 5#5", next_fire_at=leap_friday)
            )
        schedulers, databases = instances(quiet, Clock(leap_friday + timedelta(seconds=1)))
        try:
            assert await race(schedulers) == 1
            assert await race(schedulers) == 0
        finally:
            for database in databases:
                await database.dispose()
        after = await read(alice, schedule["id"])
        await until_done(alice, after["last_task_id"])
        # It cannot be resumed as it is (no firing in sight), only with another cron.
        refused = await alice.post(f"/api/v1/schedules/{schedule['id']}/resume")
        await alice.patch(f"/api/v1/schedules/{schedule['id']}", json={"cron": "0 9 * * *"})
        resumed = await alice.post(f"/api/v1/schedules/{schedule['id']}/resume")

    assert after["fired_count"] == 1
    assert after["status"] == "paused"
    assert after["next_fire_at"] is None
    assert after["last_error"].startswith("paused: '0 0 * 2 5#5' fires too rarely")
    assert datetime.fromisoformat(after["last_error_at"]) == leap_friday
    assert_problem(refused, 409, "schedule-unresumable")
    assert "fires too rarely" in refused.json()["detail"]
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "active"


async def test_a_started_scheduler_sleeps_until_told_of_a_new_schedule(
    quiet: Service, tenant_of: str
) -> None:
    fired: asyncio.Queue[UUID] = asyncio.Queue()

    async def fire(schedule: ScheduleRecord, at: datetime) -> UUID:
        task_id = await quiet.state.schedule_firings.fire(schedule, at)
        fired.put_nowait(task_id)
        return task_id

    # Two minutes ahead of the real clock: any new every-minute schedule is due at once.
    def ahead() -> datetime:
        return datetime.now(UTC) + 2 * MINUTE

    scheduler = Scheduler(ScheduleStore(quiet.state.database), fire, clock=ahead)
    quiet.state.run_stores.notices.listen(SCHEDULES, scheduler.changed)
    scheduler.start()
    try:
        # Nothing to fire: it sleeps (up to an hour) until a notice wakes it.
        async with quiet.client(tenant_of) as alice:
            schedule = await make(alice)
            task_id = await asyncio.wait_for(fired.get(), timeout=20)
            await until_done(alice, str(task_id))
            after = await read(alice, schedule["id"])
    finally:
        await scheduler.stop()

    assert after["fired_count"] == 1
    assert after["last_task_id"] == str(task_id)
    assert fired.empty()
