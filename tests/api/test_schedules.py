"""/api/v1/schedules over the real service on both databases: making, reading, changing,
pausing and deleting schedules, what is refused, and who may do what (firings are in
test_schedule_firings.py)."""

from datetime import datetime
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.api.helpers import assert_problem
from tests.service import Service

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
TASK = {"input": "What is 17 * 23 + 4?", "model": "demo"}
# Once a year: the suite's shared service (its scheduler on) fires none of these schedules.
YEARLY = "0 0 1 1 *"


def schedule_body(**fields: Any) -> dict[str, Any]:
    return {"name": "New year", "cron": YEARLY, "task": TASK, **fields}


async def make(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/schedules", json=schedule_body(**fields))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_a_schedule_is_made_read_listed_and_changed(service: Service, tenant: str) -> None:
    async with service.client(tenant) as alice:
        created = await make(alice, cron="30 9 1 1 *", timezone="Europe/Berlin")

        assert created["status"] == "active"
        assert created["agent"] == "default"
        assert created["task"] == TASK
        assert created["runs_as"] == "alice"
        assert (created["fired_count"], created["skipped_count"]) == (0, 0)
        first = datetime.fromisoformat(created["next_fire_at"])
        # 09:30 on New Year's Day in Berlin is 08:30 UTC (winter time).
        assert (first.month, first.day, first.hour, first.minute) == (1, 1, 8, 30)
        read = (await alice.get(f"/api/v1/schedules/{created['id']}")).json()
        assert read == created
        listed = (await alice.get("/api/v1/schedules")).json()
        assert [s["id"] for s in listed["items"]] == [created["id"]]

        changed = await alice.patch(
            f"/api/v1/schedules/{created['id']}",
            json={"name": "Later", "cron": "45 0 1 1 *", "timezone": "UTC"},
        )

        assert changed.status_code == 200, changed.text
        body = changed.json()
        assert (body["name"], body["cron"], body["timezone"]) == ("Later", "45 0 1 1 *", "UTC")
        assert datetime.fromisoformat(body["next_fire_at"]).minute == 45
        assert body["task"] == TASK


async def test_pausing_resuming_and_deleting(service: Service, tenant: str) -> None:
    async with service.client(tenant) as alice:
        created = await make(alice)
        one = f"/api/v1/schedules/{created['id']}"

        paused = (await alice.post(f"{one}/pause")).json()
        assert (paused["status"], paused["next_fire_at"]) == ("paused", None)
        resumed = (await alice.post(f"{one}/resume")).json()
        assert resumed["status"] == "active"
        assert resumed["next_fire_at"] is not None

        deleted = await alice.delete(one)
        assert deleted.status_code == 204
        assert_problem(await alice.get(one), 404, "not-found")
        assert (await alice.get("/api/v1/schedules")).json()["items"] == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "61 * * * *"}, "body.cron"),
        ({"cron": "* * * * * *"}, "body.cron"),
        ({"cron": "every minute"}, "body.cron"),
        ({"timezone": "Mars/Olympus_Mons"}, "body.timezone"),
        # A folder of the zone database, not a zone: once taken for a database outage (503).
        ({"timezone": "Europe"}, "body.timezone"),
        ({"timezone": "zone.tab"}, "body.timezone"),
        ({"cron": "0 0 30 2 *"}, "body.cron"),
        ({"cron": "0 0 * 2 5#5"}, "body.cron"),
        ({"task": {**TASK, "conversation_id": str(uuid4())}}, "body.task"),
        ({"task": {"model": "demo"}}, "body.task"),
    ],
)
async def test_a_bad_schedule_is_refused_naming_its_field(
    service: Service, tenant: str, fields: dict[str, Any], field: str
) -> None:
    async with service.client(tenant) as alice:
        response = await alice.post("/api/v1/schedules", json=schedule_body(**fields))
        body = assert_problem(response, 422, "validation-error")
        assert [e["field"] for e in body["errors"]] == [field], body
        assert (await alice.get("/api/v1/schedules")).json()["items"] == []


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4 *", "never fires"),
        # Only when 29 February is a Friday: next in 2036, then 2064.
        ("0 0 * 2 5#5", "fires too rarely"),
    ],
)
async def test_a_cron_that_never_or_hardly_ever_fires_is_refused_saying_so(
    service: Service, tenant: str, cron: str, says: str
) -> None:
    async with service.client(tenant) as alice:
        made = await alice.post("/api/v1/schedules", json=schedule_body(cron=cron))
        existing = await make(alice)
        changed = await alice.patch(f"/api/v1/schedules/{existing['id']}", json={"cron": cron})
        kept = (await alice.get(f"/api/v1/schedules/{existing['id']}")).json()

    for response in (made, changed):
        [error] = assert_problem(response, 422, "validation-error")["errors"]
        assert error["field"] == "body.cron"
        assert says in error["message"], error
    assert kept["cron"] == YEARLY
    # A leap day's schedule is fine: at most 8 years between firings.
    assert (await _made_with(service, tenant, "0 0 29 2 *"))["status"] == "active"


async def _made_with(service: Service, tenant: str, cron: str) -> dict[str, Any]:
    async with service.client(tenant) as alice:
        return await make(alice, cron=cron)


async def test_its_task_is_checked_as_a_submission(service: Service, tenant: str) -> None:
    async with service.client(tenant) as alice:
        unknown_agent = await alice.post(
            "/api/v1/schedules", json=schedule_body(task={**TASK, "agent": "nobody"})
        )
        unknown_model = await alice.post(
            "/api/v1/schedules", json=schedule_body(task={**TASK, "model": "no-such-model"})
        )
        bad_change = await alice.patch(
            f"/api/v1/schedules/{(await make(alice))['id']}",
            json={"cron": "*/5 * * * * 2027"},
        )

    assert assert_problem(unknown_agent, 422, "validation-error")["errors"][0]["field"] == (
        "body.agent"
    )
    assert assert_problem(unknown_model, 422, "validation-error")["errors"][0]["field"] == (
        "body.model"
    )
    assert assert_problem(bad_change, 422, "validation-error")["errors"][0]["field"] == (
        "body.cron"
    )


async def test_another_tenants_schedules_are_not_found(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant) as alice, service.client(other_tenant, **ADMIN) as other:
        one = f"/api/v1/schedules/{(await make(alice))['id']}"

        for response in (
            await other.get(one),
            await other.patch(one, json={"name": "mine now"}),
            await other.post(f"{one}/pause"),
            await other.post(f"{one}/resume"),
            await other.get(f"{one}/tasks"),
            await other.delete(one),
        ):
            assert_problem(response, 404, "not-found")
        assert (await other.get("/api/v1/schedules")).json()["items"] == []
        assert (await alice.get(one)).json()["status"] == "active"


async def test_who_may_read_and_manage(service: Service, tenant: str) -> None:
    async with (
        service.client(tenant) as alice,
        service.client(tenant, sub="bob") as bob,
        service.client(tenant, sub="vera", roles=("viewer",)) as viewer,
        service.client(tenant, **ADMIN) as admin,
    ):
        one = f"/api/v1/schedules/{(await make(alice))['id']}"

        refused = await viewer.post("/api/v1/schedules", json=schedule_body())
        assert assert_problem(refused, 403, "forbidden")["permission"] == "schedule:manage"
        assert (await viewer.get(one)).status_code == 200
        assert len((await viewer.get("/api/v1/schedules")).json()["items"]) == 1
        # Members manage their own schedules only; tenant admins any.
        not_bobs = await bob.post(f"{one}/pause")
        assert assert_problem(not_bobs, 403, "forbidden")["permission"] == "schedule:manage"
        assert_problem(await bob.delete(one), 403, "forbidden")
        paused = await admin.post(f"{one}/pause")
        assert paused.status_code == 200, paused.text
        # It still runs as its creator.
        assert paused.json()["runs_as"] == "alice"


async def test_changes_are_audited(service: Service, tenant: str) -> None:
    async with service.client(tenant, **ADMIN) as admin:
        created = await make(admin)
        await admin.post(f"/api/v1/schedules/{created['id']}/pause")
        await admin.delete(f"/api/v1/schedules/{created['id']}")
        response = await admin.get(f"/api/v1/tenants/{tenant}/audit")
        assert response.status_code == 200, response.text
        actions = [
            (row["action"], row["resource_id"])
            for row in response.json()["items"]
            if row["resource_type"] == "schedule"
        ]
    assert sorted(actions) == sorted(
        [
            ("schedule.create", created["id"]),
            ("schedule.update", created["id"]),
            ("schedule.delete", created["id"]),
        ]
    )
