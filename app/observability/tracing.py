"""OpenTelemetry traces of runs, built from the events a run records (their own timestamps), so
a span says what the chain says: a span per run of a task, a child span per tool call (LLM
calls included) from its `tool_call` step to its `tool_result` step, with the GenAI semantic
conventions for model, tokens and cost.

A task's trace id is its task id (the UUID's 128 bits) and the span of its first run takes the
low 64 bits as its span id: a run resumed on any instance, after a crash, a hand-over or an
approval, is a new span of the same trace, child of that first span, without anything being
stored or passed between instances for it.

Tracing is on only where `OTEL_EXPORTER_OTLP_ENDPOINT` is set: otherwise no `RunTracer`
exists and a run's recorder holds no trace (one `if` per batch of events).
"""

import importlib.metadata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import UUID

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from app.chain import (
    ChainEvent,
    ChainFailedEvent,
    DoneEvent,
    ReasoningStep,
    ReasoningStepEvent,
    TaskState,
    TaskStatusEvent,
    ToolType,
)
from app.config import Settings

TRACER_NAME = "omniforge.runs"
TRACES_PATH = "/v1/traces"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)  # a datetime's resolution

# GenAI semantic conventions (their names; the semconv package marks them incubating).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # its former name, which many backends still read
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
COST_USD = "omniforge.cost_usd"
TENANT_ID = "omniforge.tenant_id"
TASK_ID = "omniforge.task_id"
CHAIN_ID = "omniforge.chain_id"


def service_version() -> str:
    try:
        return importlib.metadata.version("omniforge")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def first_span_id(task_id: UUID) -> int:
    """The span id of a task's first run: derived, so a resumed run names it as its parent
    without asking anyone."""
    return task_id.int & 0xFFFF_FFFF_FFFF_FFFF


class _TaskIds(IdGenerator):
    """Random ids, except for the span of a task's first run, whose ids `first` sets just
    before it is started (nothing awaits in between)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.first: UUID | None = None

    def generate_trace_id(self) -> int:
        first = self.first
        return self._random.generate_trace_id() if first is None else first.int

    def generate_span_id(self) -> int:
        first, self.first = self.first, None
        return self._random.generate_span_id() if first is None else first_span_id(first)


def _ns(at: datetime) -> int:
    return (at - _EPOCH) // _MICROSECOND * 1000


class RunTracer:
    """Makes the traces of this process's runs and hands their spans to `processor`. Built
    once at start-up, and only when tracing is on; `shutdown` exports what is left."""

    def __init__(self, processor: SpanProcessor, *, service_name: str = "omniforge") -> None:
        version = service_version()
        self._ids = _TaskIds()
        # Not the global provider: nothing else of the process traces through it by surprise.
        self._provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: service_name, SERVICE_VERSION: version}),
            id_generator=self._ids,
            shutdown_on_exit=False,
        )
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer(TRACER_NAME, version)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, exporter: SpanExporter | None = None
    ) -> "RunTracer | None":
        """Spans exported in batches by OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (or to
        `exporter`); None when neither is given."""
        endpoint = settings.otel_exporter_otlp_endpoint
        if exporter is None:
            if not endpoint:
                return None
            # Imported only when tracing is on: it brings protobuf and requests.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + TRACES_PATH)
        return cls(BatchSpanProcessor(exporter), service_name=settings.otel_service_name)

    def trace(self, task_id: UUID, tenant_id: str, chain_id: UUID, agent: str) -> "RunTrace":
        """The trace of one run of a task, fed its events as they are recorded."""
        return RunTrace(self._tracer, self._ids, task_id, tenant_id, chain_id, agent)

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return self._provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Exports the spans still queued (blocking: call it off the event loop)."""
        self._provider.shutdown()


class RunTrace:
    """One run's spans: the run's from its first event to its `done` (or to `close`, when it
    is handed over or suspended first), and a child per tool call from its `tool_call` step
    to its `tool_result` step. Steps copied from another chain (a replay's, a fork's) made no
    call and make no span."""

    def __init__(
        self,
        tracer: trace.Tracer,
        ids: _TaskIds,
        task_id: UUID,
        tenant_id: str,
        chain_id: UUID,
        agent: str,
    ) -> None:
        self._tracer = tracer
        self._ids = ids
        self._task_id = task_id
        self._agent = agent
        self._ids_attributes = {
            TENANT_ID: tenant_id,
            TASK_ID: str(task_id),
            CHAIN_ID: str(chain_id),
        }
        self._run: Span | None = None
        self._context = trace.set_span_in_context(trace.INVALID_SPAN)
        self._calls: dict[UUID, Span] = {}
        self._ended = False
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = Decimal(0)
        self._error_code: str | None = None

    def observe(self, events: Sequence[ChainEvent]) -> None:
        """Spans started and ended as `events` say (the next batch of the run's events)."""
        if self._ended:
            return
        for event in events:
            if self._run is None:
                self._start(event)
            if isinstance(event, ReasoningStepEvent):
                step = event.step
                if step.copied_from is not None:
                    continue
                if step.tool_call is not None:
                    self._call_started(step)
                elif step.tool_result is not None:
                    self._call_ended(step)
            elif isinstance(event, ChainFailedEvent):
                self._error_code = event.error_code
            elif isinstance(event, DoneEvent):
                self._end(event.final_state, _ns(event.timestamp))
                return

    def close(self) -> None:
        """Ends, now, whatever is still open: the run left without its `done` (handed over,
        suspended for approvals); another run of the task goes on in the same trace."""
        if self._ended or self._run is None:
            return
        self._run.set_attribute("omniforge.handed_over", True)
        self._end(None, None)

    def _start(self, first: ChainEvent) -> None:
        resumed = isinstance(first, TaskStatusEvent) and bool(first.resumed)
        if resumed:
            parent = SpanContext(
                trace_id=self._task_id.int,
                span_id=first_span_id(self._task_id),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        else:
            context = self._context  # a root: the ids of a task's first run
            self._ids.first = self._task_id
        try:
            self._run = self._tracer.start_span(
                f"invoke_agent {self._agent}",
                context=context,
                kind=SpanKind.INTERNAL,
                attributes={
                    OPERATION: "invoke_agent",
                    AGENT_NAME: self._agent,
                    "omniforge.resumed": resumed,
                    **self._ids_attributes,
                },
                start_time=_ns(first.timestamp),
            )
        finally:
            self._ids.first = None
        self._context = trace.set_span_in_context(self._run)

    def _call_started(self, step: ReasoningStep) -> None:
        call = step.tool_call
        assert call is not None
        attributes: dict[str, str | int] = {
            **self._ids_attributes,
            "omniforge.step_id": str(step.id),
            "omniforge.step_number": step.step_number,
            "omniforge.tool_type": call.tool_type.value,
        }
        if call.tool_type is ToolType.LLM:
            attributes[OPERATION] = "chat"
            if call.model:
                attributes[REQUEST_MODEL] = call.model
            if call.provider:
                attributes[PROVIDER] = attributes[SYSTEM] = call.provider
            name, kind = f"chat {call.model or ''}".strip(), SpanKind.CLIENT
        else:
            attributes[OPERATION] = "execute_tool"
            attributes[TOOL_NAME] = call.tool_name
            attributes[TOOL_CALL_ID] = str(call.correlation_id)
            name, kind = f"execute_tool {call.tool_name}", SpanKind.INTERNAL
        self._calls[call.correlation_id] = self._tracer.start_span(
            name,
            context=self._context,
            kind=kind,
            attributes=attributes,
            start_time=_ns(step.timestamp),
        )

    def _call_ended(self, step: ReasoningStep) -> None:
        result = step.tool_result
        assert result is not None
        span = self._calls.pop(result.correlation_id, None)
        if span is None:  # its call was made by an earlier run of the task
            return
        span.set_attribute("omniforge.result_step_id", str(step.id))
        span.set_attribute("omniforge.attempts", result.attempts)
        if result.model:
            span.set_attribute(RESPONSE_MODEL, result.model)
        if result.provider:
            span.set_attribute(PROVIDER, result.provider)
            span.set_attribute(SYSTEM, result.provider)
        if result.deployment:
            span.set_attribute("omniforge.deployment", result.deployment)
        if result.input_tokens is not None:
            span.set_attribute(INPUT_TOKENS, result.input_tokens)
            self._input_tokens += result.input_tokens
        if result.output_tokens is not None:
            span.set_attribute(OUTPUT_TOKENS, result.output_tokens)
            self._output_tokens += result.output_tokens
        if result.cost_usd is not None:
            span.set_attribute(COST_USD, float(result.cost_usd))
            self._cost += result.cost_usd
        if result.unpriced:
            span.set_attribute("omniforge.unpriced", True)
        if result.cached:
            span.set_attribute("omniforge.cached", True)
        if not result.success:
            # The code, not the message: a tool's error text may quote what it was given.
            code = result.error_code or "tool_error"
            span.set_attribute(ERROR_TYPE, code)
            span.set_status(Status(StatusCode.ERROR, code))
        span.end(end_time=_ns(step.timestamp))

    def _end(self, final_state: TaskState | None, at_ns: int | None) -> None:
        self._ended = True
        run = self._run
        assert run is not None
        for span in _open(self._calls.values()):
            span.set_attribute(ERROR_TYPE, "abandoned")
            span.end(end_time=at_ns)
        self._calls.clear()
        run.set_attribute(INPUT_TOKENS, self._input_tokens)
        run.set_attribute(OUTPUT_TOKENS, self._output_tokens)
        run.set_attribute(COST_USD, float(self._cost))
        if final_state is not None:
            run.set_attribute("omniforge.final_state", final_state.value)
        if final_state is TaskState.FAILED:
            code = self._error_code or "failed"
            run.set_attribute(ERROR_TYPE, code)
            run.set_status(Status(StatusCode.ERROR, code))
        run.end(end_time=at_ns)


def _open(spans: Iterable[Span]) -> list[Span]:
    return [span for span in spans if span.is_recording()]
