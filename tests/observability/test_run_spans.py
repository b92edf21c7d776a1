"""Traces of real runs through the running service: a task that calls the model, a tool, then
the model again is one trace of a task span with two LLM spans and a tool span, whose tokens
and cost are the ones recorded for billing; without an endpoint, tracing costs no object."""

from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from app.api import create_app
from app.api.serving import serve_locally
from app.storage.tables import cost_records
from tests.api.helpers import stream, submit
from tests.api.tools import TEST_TOOLS
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, service_settings

USAGE = [(120, 30), (180, 45)]


def _script_calculator_task(fake: FakeLLMServer) -> None:
    (first_in, first_out), (second_in, second_out) = USAGE
    fake.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"})],
            prompt_tokens=first_in,
            completion_tokens=first_out,
        ),
        Reply.text("42", prompt_tokens=second_in, completion_tokens=second_out),
    )


async def _run_task(service: Service, tenant: str) -> str:
    async with service.client(tenant) as client:
        accepted = await submit(client, input="what is 6 * 7?", tools=["calculator"])
        events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed", events[-2].data
    return str(accepted["task_id"])


async def _cost_rows(service: Service, task_id: str) -> list[Any]:
    async with service.state.database.read() as connection:
        statement = (
            select(cost_records)
            .where(cost_records.c.task_id == UUID(task_id))
            .order_by(cost_records.c.recorded_at)
        )
        return list((await connection.execute(statement)).all())


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_task_is_a_trace_of_its_run_its_llm_calls_and_its_tool_call(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    exporter = InMemorySpanExporter()
    settings = service_settings(service_dir, database_url, fake_llm)
    app = create_app(settings, tools=TEST_TOOLS, span_exporter=exporter)
    async with serve_locally(app) as base_url:
        service = Service(base_url, app, settings, fake_llm)
        tenant = await service.create_tenant(f"t-{uuid4().hex[:12]}")
        _script_calculator_task(fake_llm)
        task_id = await _run_task(service, tenant)
        async with service.client(tenant) as client:
            chain_id = (await client.get(f"/api/v1/tasks/{task_id}")).json()["chain_id"]
        rows = await _cost_rows(service, task_id)
    # The service stopped: its tracer exported what its batches still held.

    spans = [s for s in exporter.get_finished_spans() if _attributes(s).get("omniforge.task_id")]
    (task,) = [s for s in spans if s.name.startswith("invoke_agent")]
    llm_calls = sorted(
        (s for s in spans if _attributes(s).get("gen_ai.operation.name") == "chat"),
        key=lambda s: s.start_time or 0,
    )
    (tool,) = [s for s in spans if _attributes(s).get("gen_ai.operation.name") == "execute_tool"]
    assert len(spans) == 4
    assert len(llm_calls) == 2
    assert {s.context.trace_id for s in spans} == {UUID(task_id).int}
    for child in [*llm_calls, tool]:
        assert child.parent is not None
        assert child.parent.span_id == task.context.span_id
    for span in spans:
        assert _attributes(span)["omniforge.tenant_id"] == tenant
        assert _attributes(span)["omniforge.task_id"] == task_id
        assert _attributes(span)["omniforge.chain_id"] == chain_id
    assert _attributes(tool)["gen_ai.tool.name"] == "calculator"
    assert "omniforge.step_id" in _attributes(tool)

    # Exactly what was recorded for billing, call by call and in total.
    assert [r.tool_name for r in rows] == ["llm", "llm"]
    for span, row in zip(llm_calls, rows, strict=True):
        attributes = _attributes(span)
        assert attributes["gen_ai.request.model"] == MODEL
        assert attributes["gen_ai.usage.input_tokens"] == row.input_tokens
        assert attributes["gen_ai.usage.output_tokens"] == row.output_tokens
        assert attributes["omniforge.cost_usd"] == float(row.cost_usd)
        assert attributes["omniforge.step_id"] == str(row.step_id) or attributes[
            "omniforge.result_step_id"
        ] == str(row.step_id)
    assert [(r.input_tokens, r.output_tokens) for r in rows] == USAGE
    totals = _attributes(task)
    assert totals["gen_ai.usage.input_tokens"] == sum(r.input_tokens for r in rows)
    assert totals["gen_ai.usage.output_tokens"] == sum(r.output_tokens for r in rows)
    assert totals["omniforge.cost_usd"] == float(sum((r.cost_usd for r in rows), Decimal(0)))
    assert totals["omniforge.final_state"] == "completed"
    assert task.start_time is not None
    assert task.end_time is not None
    assert all(
        task.start_time <= (s.start_time or 0) <= (s.end_time or 0) <= task.end_time
        for s in [*llm_calls, tool]
    )


@pytest.fixture
def sdk_objects_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the SDK's tracer providers and spans constructed meanwhile."""
    made: list[str] = []
    for cls in (sdk_trace.TracerProvider, sdk_trace.Span):
        original = cls.__init__

        def counting(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            made.append(type(self).__name__)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    return made


async def test_without_an_endpoint_a_run_makes_no_tracer_and_no_span(
    service: Service, tenant: str, sdk_objects_made: list[str]
) -> None:
    assert service.settings.otel_exporter_otlp_endpoint is None
    _script_calculator_task(service.fake_llm)

    task_id = await _run_task(service, tenant)

    assert len(await _cost_rows(service, task_id)) == 2  # it ran, and called twice
    assert sdk_objects_made == []
