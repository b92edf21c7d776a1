"""Tenant quotas through the running service: submissions over the rate or the concurrent
runs get 429 with `Retry-After` and `RateLimit` fields; a call over a limit inside a run ends
it `rate_limited` naming the limit and when it resets; concurrent runs cannot together spend
past a tenant's cost window; with Redis, limits hold across instances."""

import asyncio
import math
import os
import time
from decimal import Decimal
from pathlib import Path
from uuid import uuid4

from sqlalchemy import select

from app.storage.tables import cost_records
from tests.api.helpers import assert_problem, configure, cost_of, stream, submit
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import (
    MODEL,
    OUTPUT_PRICE,
    Service,
    running_service,
    service_settings,
)

REDIS_URL = os.environ.get("OMNIFORGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def test_the_submission_over_the_rate_gets_429_with_a_correct_retry_after(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "quotas", {"submissions_per_minute": 3})
    service.fake_llm.script(MODEL, *[Reply.text("ok") for _ in range(3)])
    async with service.client(tenant) as client:
        first_sent = time.monotonic()
        accepted = [await submit(client) for _ in range(3)]
        refused = await client.post("/api/v1/tasks", json={"input": "one more"})
        answered = time.monotonic()
        for task in accepted:
            await stream(client, task["task_id"])

    body = assert_problem(refused, 429, "rate-limited")
    assert body["limit"] == "submissions_per_minute"
    # The first submission leaves the 60 s window at the earliest 60 s after it was sent.
    retry_after = int(refused.headers["Retry-After"])
    assert math.ceil(60 - (answered - first_sent)) <= retry_after <= 60
    assert 0 < body["retry_after_s"] <= retry_after
    assert refused.headers["RateLimit-Policy"] == '"submissions_per_minute";q=3;w=60'
    assert refused.headers["RateLimit"] == f'"submissions_per_minute";r=0;t={retry_after}'


async def test_the_quotas_are_audited_and_read_back(service: Service, tenant: str) -> None:
    quotas = {
        "submissions_per_minute": 10,
        "tool_calls_per_minute": {"custom": 5},
        "cost_per_day_usd": "12.5",
        "default_budget": {"max_cost_usd": "0.5"},
    }
    stored = await configure(service, tenant, "quotas", quotas)
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        read = (await admin.get(f"/api/v1/tenants/{tenant}/quotas")).json()
        audit = (await admin.get(f"/api/v1/tenants/{tenant}/audit?action=tenant.quotas.*")).json()
        invalid = await admin.put(
            f"/api/v1/tenants/{tenant}/quotas", json={"tokens_per_minute": 0, "bogus": 1}
        )

    assert read == stored
    assert read["cost_per_day_usd"] == "12.5"
    assert read["tool_calls_per_minute"] == {"custom": 5}
    assert read["default_budget"]["max_cost_usd"] == "0.5"
    [event] = audit["items"]
    assert event["actor"] == "root"
    assert event["details"]["after"]["quotas"]["submissions_per_minute"] == 10
    body = assert_problem(invalid, 422, "validation-error")
    assert {e["field"] for e in body["errors"]} == {"body.tokens_per_minute", "body.bogus"}


async def test_a_submission_over_the_concurrent_runs_gets_429_until_one_finishes(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "quotas", {"concurrent_runs": 1})
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("slow", delay_s=30), Reply.text("next"))
    async with service.client(tenant) as client:
        running = await submit(client)
        await fake.wait_for_requests(1, MODEL)
        refused = await client.post("/api/v1/tasks", json={"input": "another"})
        await client.post(f"/api/v1/tasks/{running['task_id']}/cancel")
        after = await submit(client)
        await stream(client, after["task_id"])

    body = assert_problem(refused, 429, "rate-limited")
    assert body["limit"] == "concurrent_runs"
    assert "concurrent_runs (1)" in body["detail"]


async def test_an_llm_call_over_the_rate_ends_the_run_rate_limited(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "quotas", {"llm_calls_per_minute": 1, "max_wait_s": 0})
    service.fake_llm.script(
        MODEL, Reply.tool_calls([ToolCall("calculator", {"expression": "1 + 1"})])
    )
    async with service.client(tenant) as client:
        accepted = await submit(client)
        events = await stream(client, accepted["task_id"])

    [failed] = [e.json for e in events if e.event == "chain_failed"]
    assert failed["error_code"] == "rate_limited"
    details = failed["details"]
    assert details["limit"] == "llm_calls_per_minute"
    assert details["limit_value"] == 1
    assert details["window_s"] == 60
    assert 0 < details["retry_after_s"] <= 60
    assert details["resets_at"]
    assert len(service.fake_llm.requests_for(MODEL)) == 1
    # the refused call is a failed step of the kept chain
    results = [e.json["step"]["tool_result"] for e in events if e.event == "reasoning_step"]
    assert [r["error_code"] for r in results if r] == [None, None, "rate_limited"]


async def test_concurrent_runs_cannot_spend_past_the_daily_cost_window(
    service: Service, tenant: str
) -> None:
    limit = Decimal("0.05")
    await configure(service, tenant, "quotas", {"cost_per_day_usd": str(limit), "max_wait_s": 0})
    call_cost = cost_of(1_000, 500)
    service.fake_llm.always(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"})],
            prompt_tokens=1_000,
            completion_tokens=500,
        ),
    )
    async with service.client(tenant) as client:
        accepted = await asyncio.gather(*[submit(client) for _ in range(20)])
        streams = await asyncio.gather(*[stream(client, a["task_id"]) for a in accepted])

    async with service.state.database.read() as connection:
        spent = [
            row.cost_usd
            for row in await connection.execute(
                select(cost_records.c.cost_usd).where(cost_records.c.tenant_id == tenant)
            )
        ]
    total = sum(spent, Decimal(0))
    ends = [events[-2].json.get("error_code") for events in streams]
    # One call's estimate: its prompt and at most the whole output cap.
    estimate_bound = Decimal(OUTPUT_PRICE) * service.settings.llm_max_output_tokens + call_cost
    assert all(cost == call_cost for cost in spent)
    assert total <= limit + estimate_bound
    assert total <= limit  # estimates never under-count here, so not even one call slips
    # Each run went on until the window refused it (or, early and lucky, to its last
    # iteration); the window was used, not refused early.
    assert set(ends) <= {"rate_limited", "max_iterations"}
    assert ends.count("rate_limited") >= 10
    assert total >= limit - 2 * estimate_bound


async def test_redis_shares_the_limits_between_two_instances(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    one_dir, two_dir = service_dir / "one", service_dir / "two"
    one_dir.mkdir()
    two_dir.mkdir()
    tenant = f"r-{uuid4().hex[:12]}"
    one_settings = service_settings(one_dir, database_url, fake_llm, redis_url=REDIS_URL)
    two_settings = service_settings(two_dir, database_url, fake_llm, redis_url=REDIS_URL)
    async with (
        running_service(one_settings, fake_llm) as one,
        running_service(two_settings, fake_llm) as two,
    ):
        await one.create_tenant(tenant)
        await configure(one, tenant, "quotas", {"submissions_per_minute": 2})
        fake_llm.script(MODEL, Reply.text("a"), Reply.text("b"))
        async with one.client(tenant) as first, two.client(tenant) as second:
            a = await submit(first)
            b = await submit(second)
            refused_by_two = await second.post("/api/v1/tasks", json={"input": "c"})
            refused_by_one = await first.post("/api/v1/tasks", json={"input": "d"})
            await stream(first, a["task_id"])
            await stream(second, b["task_id"])

    assert_problem(refused_by_two, 429, "rate-limited")
    assert_problem(refused_by_one, 429, "rate-limited")


async def test_a_restarted_instance_remembers_the_days_spend(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    tenant = f"d-{uuid4().hex[:12]}"
    estimate_room = Decimal(OUTPUT_PRICE) * 4096  # a call may write the whole output cap
    first_cost = cost_of(1_000, 500)
    # Room for one call's estimate, not for a second one after the first call's cost.
    limit = estimate_room + first_cost / 2 + Decimal("0.0005")
    calculation = Reply.tool_calls(
        [ToolCall("calculator", {"expression": "6 * 7"})],
        prompt_tokens=1_000,
        completion_tokens=500,
    )
    before_dir, after_dir = service_dir / "before", service_dir / "after"
    before_dir.mkdir()
    after_dir.mkdir()
    async with running_service(
        service_settings(before_dir, database_url, fake_llm), fake_llm
    ) as before:
        await before.create_tenant(tenant)
        await configure(before, tenant, "quotas", {"cost_per_day_usd": str(limit), "max_wait_s": 0})
        fake_llm.script(MODEL, calculation)
        async with before.client(tenant) as client:
            first = await submit(client)
            first_events = await stream(client, first["task_id"])
    requests_before = len(fake_llm.requests_for(MODEL))
    # A new process: its limit store starts empty, the database remembers the spend.
    async with (
        running_service(service_settings(after_dir, database_url, fake_llm), fake_llm) as after,
        after.client(tenant) as client,
    ):
        second = await submit(client)
        second_events = await stream(client, second["task_id"])

    assert requests_before == 1
    assert first_events[-2].json["details"]["limit"] == "cost_per_day_usd"
    [failed] = [e.json for e in second_events if e.event == "chain_failed"]
    assert failed["error_code"] == "rate_limited"
    assert failed["details"]["limit"] == "cost_per_day_usd"
    assert len(fake_llm.requests_for(MODEL)) == 1  # the restarted one made no call
