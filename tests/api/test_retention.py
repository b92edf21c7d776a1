"""Retention: tenants' periods through the settings API, and the purge, which deletes exactly
what is past them, in batches, while runs go on, leaving cost and usage reports as they were."""

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from app.governance.deletions import DeletedRows
from app.governance.retention import Purge, PurgeReport, RetentionDefaults
from app.storage import Database
from app.storage.tables import (
    audit_events,
    conversations,
    cost_records,
    file_blobs,
    file_texts,
    files,
    reasoning_chains,
    reasoning_steps,
    task_events,
    tasks,
)
from tests.api.helpers import assert_invalid, assert_problem, script_two_tool_task, stream, submit
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

RETENTION = "/api/v1/tenants/{}/retention"


def _purge(service: Service, clock: Callable[[], datetime], batch_size: int = 2) -> Purge:
    files_library = service.state.toolbox.files
    assert files_library is not None
    return Purge(
        service.state.database,
        defaults=RetentionDefaults(90, 400),
        batch_size=batch_size,
        file_store=files_library.store,
        deleted_rows=DeletedRows(CollectorRegistry()),
        clock=clock,
    )


async def _counts(service: Service, tenant: str, file_ids: list[str]) -> dict[str, int]:
    """The tenant's rows per table (steps through its chains, file bytes by their keys)."""
    counted = {}
    async with service.state.database.read() as connection:
        for table in (
            tasks,
            reasoning_chains,
            task_events,
            cost_records,
            conversations,
            files,
            file_texts,
            audit_events,
        ):
            statement = select(func.count()).where(table.c.tenant_id == tenant)
            counted[table.name] = await connection.scalar(statement) or 0
        chains = select(reasoning_chains.c.id).where(reasoning_chains.c.tenant_id == tenant)
        counted[reasoning_steps.name] = (
            await connection.scalar(
                select(func.count()).where(reasoning_steps.c.chain_id.in_(chains))
            )
            or 0
        )
        keys = [UUID(file_id).hex for file_id in file_ids]
        counted[file_blobs.name] = (
            await connection.scalar(select(func.count()).where(file_blobs.c.key.in_(keys))) or 0
        )
    return counted


async def _rows_of(service: Service, tenant: str, task_ids: list[str]) -> dict[str, int]:
    """How many rows of each table belong to these tasks."""
    ids = [UUID(task_id) for task_id in task_ids]
    async with service.state.database.read() as connection:
        chains = select(reasoning_chains.c.id).where(reasoning_chains.c.task_id.in_(ids))
        counted = {
            table.name: await connection.scalar(
                select(func.count()).where(table.c.task_id.in_(ids), table.c.tenant_id == tenant)
            )
            or 0
            for table in (reasoning_chains, task_events, cost_records)
        }
        counted[reasoning_steps.name] = (
            await connection.scalar(
                select(func.count()).where(reasoning_steps.c.chain_id.in_(chains))
            )
            or 0
        )
    counted[tasks.name] = len(ids)
    return counted


async def _audit_before(service: Service, tenant: str, moment: datetime) -> int:
    async with service.state.database.read() as connection:
        a = audit_events.c
        statement = select(func.count()).where(a.tenant_id == tenant, a.created_at < moment)
        return await connection.scalar(statement) or 0


async def _reports(client: httpx.AsyncClient, tenant: str) -> list[Any]:
    """The tenant's cost report by every grouping but the task, and its usage report, over
    whole UTC days around today."""
    today = datetime.now(UTC).date()
    since, until = (today - timedelta(days=1)).isoformat(), (today + timedelta(days=2)).isoformat()
    period = {"from": f"{since}T00:00:00Z", "to": f"{until}T00:00:00Z"}
    answers = []
    for grouping in [
        {},
        {"group_by": "model"},
        {"group_by": "day", "split_by": "model"},
        {"group_by": "tool"},
        {"group_by": "user"},
        {"group_by": "agent", "split_by": "tool"},
        {"group_by": "strategy", "split_by": "model"},
    ]:
        response = await client.get(f"/api/v1/tenants/{tenant}/costs", params=period | grouping)
        assert response.status_code == 200, response.text
        answers.append(response.json())
    usage = await client.get(f"/api/v1/tenants/{tenant}/usage", params={"from": since, "to": until})
    assert usage.status_code == 200, usage.text
    answers.append(usage.json())
    return answers


async def _upload(client: httpx.AsyncClient, text: str) -> str:
    response = await client.post("/api/v1/files", files={"file": ("notes.txt", text.encode())})
    assert response.status_code == 201, response.text
    file_id: str = response.json()["id"]
    return file_id


async def _run(client: httpx.AsyncClient, **body: Any) -> str:
    task_id: str = (await submit(client, **body))["task_id"]
    events = await stream(client, task_id)
    assert events[-1].json["final_state"] == "completed", events[-2].json
    return task_id


async def _turn(client: httpx.AsyncClient, conversation: str) -> str:
    return await _run(client, input="Hello again", conversation_id=conversation)


async def test_the_purge_deletes_exactly_what_is_past_retention_in_batches_while_runs_go_on(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    release = asyncio.Event()
    fake.script(MODEL, Reply.text("held answer", gate=release))
    async with (
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
        service.client(tenant) as alice,
    ):
        put = await admin.put(
            RETENTION.format(tenant), json={"retention_days": 5, "audit_retention_days": 5}
        )
        assert put.status_code == 200, put.text
        # A run older than everything else, still running through the purge.
        held = (await submit(alice, input="Take your time"))["task_id"]
        await fake.wait_for_requests(1)

        script_two_tool_task(fake)
        fake.script(MODEL, *[Reply.text(f"answer {n}") for n in range(2, 8)])
        old_tasks = [await _run(alice)]
        old_tasks += [await _run(alice, input=f"Question {n}") for n in (2, 3)]
        old_conversation = (await alice.post("/api/v1/conversations", json={})).json()["id"]
        old_turns = [await _turn(alice, old_conversation)]
        lively = (await alice.post("/api/v1/conversations", json={})).json()["id"]
        lively_turns = [await _turn(alice, lively)]
        old_file = await _upload(alice, "old notes")
        # Everything before this moment is past retention once the clock is 5 days on.
        moment = datetime.now(UTC)
        new_tasks = [await _run(alice, input="A fresh question")]
        lively_turns.append(await _turn(alice, lively))
        new_file = await _upload(alice, "new notes")

        # Stream openings' audit events are stored with the next write: this one.
        await service.state.runs.record_audit([])
        before = await _counts(service, tenant, [old_file, new_file])
        reports_before = await _reports(admin, tenant)
        expired = await _rows_of(service, tenant, old_tasks + old_turns)
        expired_audit = await _audit_before(service, tenant, moment)
        report = await _purge(service, lambda: moment + timedelta(days=5)).run()
        after = await _counts(service, tenant, [old_file, new_file])
        reports_after = await _reports(admin, tenant)

        release.set()
        held_events = await stream(alice, held)
        held_task = (await alice.get(f"/api/v1/tasks/{held}")).json()
        held_chain = (await alice.get(f"/api/v1/tasks/{held}/chain")).json()
        kept = [
            (await alice.get(f"/api/v1/tasks/{task_id}")).status_code
            for task_id in new_tasks + lively_turns
        ]
        gone = [
            (await alice.get(f"/api/v1/tasks/{task_id}")).status_code
            for task_id in old_tasks + old_turns
        ]
        conversation_gone = await alice.get(f"/api/v1/conversations/{old_conversation}")
        conversation_kept = await alice.get(f"/api/v1/conversations/{lively}")
        file_gone = await alice.get(f"/api/v1/files/{old_file}/content")
        file_kept = await alice.get(f"/api/v1/files/{new_file}/content")

    assert not report.skipped
    deleted = {**expired, "conversations": 1, "files": 1, "audit_events": expired_audit}
    assert dict(report.tenants[tenant].deleted) == deleted
    expected = dict(before)
    for table, rows in deleted.items():
        expected[table] -= rows
    # The old file's text (one chunk) and bytes go with it.
    expected["file_texts"] -= 1
    expected["file_blobs"] -= 1
    expected["audit_events"] += 1  # the purge's own event: what it deleted, no content
    assert after == expected
    # Two batches of the three tasks, one of the conversation, one of the file, the audit
    # events two at a time.
    assert report.tenants[tenant].batches == 2 + 1 + 1 + -(-expired_audit // 2)
    assert reports_after == reports_before
    assert reports_before[0]["totals"]["calls"] > 0
    assert kept == [200] * len(kept)
    assert gone == [404] * len(gone)
    assert conversation_gone.status_code == 404
    assert [turn["task_id"] for turn in conversation_kept.json()["turns"]] == lively_turns
    assert (file_gone.status_code, file_kept.status_code) == (404, 200)
    # The run held through the purge ended normally, with its rows.
    assert held_events[-1].json["final_state"] == "completed"
    assert held_task["result"] == "held answer"
    assert [step["type"] for step in held_chain["steps"]][-1] == "synthesis"
    assert len(held_chain["steps"]) == len(held_events) - 4


async def test_a_purge_deletes_nothing_of_tenants_within_retention(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("kept"))
    async with service.client(tenant) as alice:
        task_id = await _run(alice)
        await service.state.runs.record_audit([])  # its stream's opening, stored
        before = await _counts(service, tenant, [])
        # 89 days on, the platform's 90 days have not passed for anyone created today.
        report = await _purge(service, lambda: datetime.now(UTC) + timedelta(days=89)).run()
        task = await alice.get(f"/api/v1/tasks/{task_id}")
    assert not report.skipped
    assert tenant not in report.tenants
    assert await _counts(service, tenant, []) == before
    assert task.status_code == 200


async def test_retention_settings_default_to_the_platform_and_are_validated_and_audited(
    service: Service, tenant: str, other_tenant: str
) -> None:
    url = RETENTION.format(tenant)
    async with (
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
        service.client(tenant) as member,
        service.client(other_tenant, sub="root", roles=("tenant_admin",)) as stranger,
    ):
        defaults = await admin.get(url)
        changed = await admin.put(url, json={"retention_days": 30})
        read = await admin.get(url)
        reset = await admin.put(url, json={"retention_days": None, "audit_retention_days": 800})
        too_short = await admin.put(url, json={"retention_days": 0})
        too_long = await admin.put(url, json={"audit_retention_days": 3651})
        unknown = await admin.put(url, json={"retain": 3})
        forbidden = await member.put(url, json={"retention_days": 30})
        elsewhere = await stranger.get(url)
        elsewhere_put = await stranger.put(url, json={"retention_days": 1})
        audit = await admin.get(
            f"/api/v1/tenants/{tenant}/audit", params={"action": "tenant.retention.update"}
        )

    assert defaults.json() == {
        "retention_days": None,
        "audit_retention_days": None,
        "effective_retention_days": 90,
        "effective_audit_retention_days": 400,
    }
    assert changed.json()["effective_retention_days"] == 30
    assert read.json() == changed.json()
    assert reset.json() == {
        "retention_days": None,
        "audit_retention_days": 800,
        "effective_retention_days": 90,
        "effective_audit_retention_days": 800,
    }
    assert_invalid(too_short, "body.retention_days")
    assert_invalid(too_long, "body.audit_retention_days")
    assert_invalid(unknown, "body.retain")
    assert_problem(forbidden, 403, "forbidden")
    assert_problem(elsewhere, 404, "not-found")
    assert_problem(elsewhere_put, 404, "not-found")
    events = audit.json()["items"]
    assert [(e["details"]["before"], e["details"]["after"]) for e in reversed(events)] == [
        (
            {"retention_days": None, "audit_retention_days": None},
            {"retention_days": 30, "audit_retention_days": None},
        ),
        (
            {"retention_days": 30, "audit_retention_days": None},
            {"retention_days": None, "audit_retention_days": 800},
        ),
    ]


@pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)
async def test_one_instance_purges_at_a_time(own_database_url: str) -> None:
    """Another instance's purge (its advisory lock) makes this one skip its turn."""
    database = Database(own_database_url)
    url = make_url(own_database_url).set(drivername="postgresql")
    other = await asyncpg.connect(url.render_as_string(hide_password=False))
    purge = Purge(
        database,
        defaults=RetentionDefaults(1, 1),
        batch_size=10,
        file_store=None,
        deleted_rows=DeletedRows(CollectorRegistry()),
    )
    try:
        await other.execute("SELECT pg_advisory_lock($1)", 0x6F6D6E6970757267)
        while_other_purges = await purge.run()
        await other.execute("SELECT pg_advisory_unlock($1)", 0x6F6D6E6970757267)
        afterwards = await purge.run()
    finally:
        await other.close()
        await database.dispose()
    assert while_other_purges == PurgeReport(skipped=True)
    assert afterwards == PurgeReport(skipped=False)
