"""A real `omniforge serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` exports each run's trace over
OTLP/HTTP: a receiver on 127.0.0.1 decodes what arrives with the OpenTelemetry protobufs."""

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

from app.observability.tracing import service_version
from tests.api.helpers import stream, submit
from tests.cluster import cluster, free_port
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every resource's spans posted to `/v1/traces`."""

    def __init__(self) -> None:
        self.batches: list[ResourceSpans] = []
        self.arrived = asyncio.Event()

    async def traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        self.batches.extend(export.resource_spans)
        self.arrived.set()
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    def spans(self) -> list[Span]:
        return [span for rs in self.batches for scope in rs.scope_spans for span in scope.spans]


@asynccontextmanager
async def receiving() -> AsyncIterator[tuple[Receiver, str]]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/v1/traces", receiver.traces)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield receiver, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


async def test_a_served_run_is_exported_over_otlp_http(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"})],
            prompt_tokens=120,
            completion_tokens=30,
        ),
        Reply.text("42", prompt_tokens=180, completion_tokens=45),
    )
    async with (
        receiving() as (receiver, endpoint),
        cluster(
            own_database_url,
            tmp_path,
            fake_llm,
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_SERVICE_NAME="omniforge-under-test",
        ) as group,
    ):
        instance = await group.instance("traced")
        async with instance.client(group.token) as client:
            task_id = (await submit(client, tools=["calculator"]))["task_id"]
            events = await stream(client, task_id)
        assert events[-1].json["final_state"] == "completed"
        # Stopping drains: the spans still batched are exported before the process exits.
        # (uvicorn exits by the signal it caught, once shut down.)
        assert await instance.terminate() in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in instance.log
        await asyncio.wait_for(receiver.arrived.wait(), 10)
        costs = await group.cost_rows(task_id)

    resource = _attributes(receiver.batches[0].resource.attributes)
    assert resource["service.name"] == "omniforge-under-test"
    assert resource["service.version"] == service_version()
    spans = [
        s for s in receiver.spans() if _attributes(s.attributes).get("omniforge.task_id") == task_id
    ]
    assert {s.trace_id for s in spans} == {UUID(task_id).bytes}
    (task,) = [s for s in spans if s.name.startswith("invoke_agent")]
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time_unix_nano
    )
    (tool,) = [s for s in spans if s.name == "execute_tool calculator"]
    assert len(spans) == 4
    assert len(chats) == 2
    assert task.parent_span_id == b""
    assert all(s.parent_span_id == task.span_id for s in [*chats, tool])
    assert chats[0].kind == Span.SpanKind.SPAN_KIND_CLIENT
    usage = [
        (
            _attributes(s.attributes)["gen_ai.usage.input_tokens"],
            _attributes(s.attributes)["gen_ai.usage.output_tokens"],
            _attributes(s.attributes)["omniforge.cost_usd"],
        )
        for s in chats
    ]
    recorded = sorted(costs, key=lambda row: row.recorded_at)
    assert usage == [(r.input_tokens, r.output_tokens, float(r.cost_usd)) for r in recorded]
    totals = _attributes(task.attributes)
    assert (totals["gen_ai.usage.input_tokens"], totals["gen_ai.usage.output_tokens"]) == (300, 75)
    assert totals["omniforge.tenant_id"] == group.tenant
