"""`GET /metrics` after scripted runs through the running service: each series with the
labels and values the runs imply (tokens and spend from the scripted usage and the model's
prices), refusals and budget stops by limit, durations, active runs and open streams."""

import time
from decimal import Decimal
from typing import Any
from uuid import uuid4

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.chain import ChainFailedEvent, ChainMetrics, DoneEvent, ErrorCode, TaskState
from app.runs.metrics import RunLabels, RunMetrics
from tests.api.helpers import (
    TWO_TOOL_TASK_COST,
    configure,
    script_two_tool_task,
    stream,
    submit,
)
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import read_sse

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def _samples(service: Service) -> Samples:
    async with httpx.AsyncClient(base_url=service.base_url) as client:
        response = await client.get("/metrics")  # no token needed
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _parse(response.text)


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_run_is_counted_by_tenant_model_and_tool_type(
    service: Service, tenant: str
) -> None:
    before = await _samples(service)
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        accepted = await submit(client)
        await stream(client, accepted["task_id"])
    after = await _samples(service)

    assert (
        _value(after, "omniforge_llm_calls_total", tenant=tenant, model=MODEL, outcome="success")
        == 3
    )
    assert (
        _value(
            after, "omniforge_tool_calls_total", tenant=tenant, tool_type="llm", outcome="success"
        )
        == 3
    )
    assert (
        _value(
            after, "omniforge_tool_calls_total", tenant=tenant, tool_type="skill", outcome="success"
        )
        == 2
    )
    assert (
        _value(after, "omniforge_tokens_total", tenant=tenant, model=MODEL, direction="input")
        == 100 + 150 + 200
    )
    assert (
        _value(after, "omniforge_tokens_total", tenant=tenant, model=MODEL, direction="output")
        == 20 + 25 + 30
    )
    spend = _value(after, "omniforge_spend_usd_total", tenant=tenant, model=MODEL)
    assert Decimal(repr(spend)).quantize(Decimal("1e-9")) == TWO_TOOL_TASK_COST.quantize(
        Decimal("1e-9")
    )
    completed = "omniforge_run_duration_seconds_count"
    assert (
        _value(after, completed, final_state="completed")
        == _value(before, completed, final_state="completed") + 1
    )
    assert _value(after, "omniforge_active_runs") == 0
    assert _value(after, "omniforge_open_streams") == 0


async def test_active_runs_and_open_streams_while_a_run_is_followed(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("slow", delay_s=30))
    async with service.client(tenant) as client:
        accepted = await submit(client)
        await fake.wait_for_requests(1, MODEL)
        async with client.stream("GET", f"/api/v1/tasks/{accepted['task_id']}/events") as events:
            # Held, so that leaving the loop does not close it (and with it the response)
            # before the sample is taken.
            reading = read_sse(events)
            async for event in reading:
                if event.event == "task_status":  # the stream is open and serving
                    break
            during = await _samples(service)
        await client.post(f"/api/v1/tasks/{accepted['task_id']}/cancel")
        await stream(client, accepted["task_id"])  # read to its end: closed by the server
    after = await _samples(service)

    assert _value(during, "omniforge_active_runs") == 1
    assert _value(during, "omniforge_open_streams") == 1
    cancelled = "omniforge_run_duration_seconds_count"
    assert (
        _value(after, cancelled, final_state="cancelled")
        == _value(during, cancelled, final_state="cancelled") + 1
    )
    assert _value(after, "omniforge_active_runs") == 0
    assert _value(after, "omniforge_open_streams") == 0
    assert (
        _value(after, "omniforge_llm_calls_total", tenant=tenant, model=MODEL, outcome="failure")
        == 1
    )


async def test_refusals_and_budget_stops_are_counted_by_limit(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    before = await _samples(service)
    await configure(
        service,
        tenant,
        "quotas",
        {"submissions_per_minute": 2, "llm_calls_per_minute": 2, "max_wait_s": 0},
    )
    calculation = Reply.tool_calls([ToolCall("calculator", {"expression": "1 + 1"})])
    fake.script(MODEL, calculation, calculation)
    async with service.client(tenant) as client:
        stopped = await submit(client, budget={"max_llm_calls": 1})
        await stream(client, stopped["task_id"])
        limited = await submit(client)
        await stream(client, limited["task_id"])
        refused = await client.post("/api/v1/tasks", json={"input": "a third"})
    samples = await _samples(service)

    assert refused.status_code == 429
    assert (
        _value(
            samples,
            "omniforge_rate_limit_refusals_total",
            tenant=tenant,
            limit="submissions_per_minute",
            where="submission",
        )
        == 1
    )
    assert (
        _value(
            samples,
            "omniforge_rate_limit_refusals_total",
            tenant=tenant,
            limit="llm_calls_per_minute",
            where="run",
        )
        == 1
    )
    assert (
        _value(
            samples,
            "omniforge_budget_stops_total",
            tenant=tenant,
            model=MODEL,
            limit="max_llm_calls",
        )
        == 1
    )

    failed = "omniforge_run_duration_seconds_count"
    assert (
        _value(samples, failed, final_state="failed")
        == _value(before, failed, final_state="failed") + 2
    )


def test_a_stop_without_a_named_limit_is_counted_as_unknown() -> None:
    metrics = RunMetrics()
    run = RunLabels("tenant-a", "model-a")
    chain_id = uuid4()
    events = [
        ChainFailedEvent(
            task_id="t",
            chain_id=chain_id,
            error_code=code,
            error_message="stopped",
            details=details,
            metrics=ChainMetrics(),
        )
        for code, details in [
            (ErrorCode.RATE_LIMITED, {}),
            (ErrorCode.BUDGET_EXCEEDED, {}),
            (ErrorCode.BUDGET_EXCEEDED, {"limit": "max_cost_usd"}),
        ]
    ]
    metrics.observe(run, events)
    samples = _parse(metrics.render().decode())

    assert (
        _value(
            samples,
            "omniforge_rate_limit_refusals_total",
            tenant="tenant-a",
            limit="unknown",
            where="run",
        )
        == 1
    )
    for limit in ("unknown", "max_cost_usd"):
        assert (
            _value(
                samples,
                "omniforge_budget_stops_total",
                tenant="tenant-a",
                model="model-a",
                limit=limit,
            )
            == 1
        )


def test_a_run_duration_is_measured_from_its_start() -> None:
    metrics = RunMetrics()
    elapsed = 7.0  # between the 5 s and 10 s buckets
    run = RunLabels("tenant-a", "model-a", started=time.monotonic() - elapsed)
    done = DoneEvent(task_id="t", chain_id=uuid4(), final_state=TaskState.COMPLETED)
    metrics.observe(run, [done])
    samples = _parse(metrics.render().decode())

    bucket = "omniforge_run_duration_seconds_bucket"
    assert _value(samples, bucket, final_state="completed", le="5.0") == 0
    assert _value(samples, bucket, final_state="completed", le="10.0") == 1
    assert _value(samples, "omniforge_run_duration_seconds_sum", final_state="completed") >= elapsed
