"""A run's spans as its events make them: ids derived from the task so that every run of a
task (a resume on any instance) is one trace, error status where a call or the run failed,
what was left open ended when the run leaves, and no span for steps another chain made."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from app.chain import (
    ChainEvent,
    ChainFailedEvent,
    ChainMetrics,
    ChainStartedEvent,
    DoneEvent,
    ErrorCode,
    ReasoningStep,
    ReasoningStepEvent,
    StepType,
    TaskState,
    TaskStatusEvent,
    ToolType,
)
from app.chain.models import ToolCallInfo, ToolResultInfo
from app.config import Settings
from app.observability.tracing import RunTracer, first_span_id

TENANT = "t-trace"
START = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


class Run:
    """Events of one run of a task, a second apart."""

    def __init__(self, task_id: UUID, chain_id: UUID) -> None:
        self.task_id, self.chain_id = task_id, chain_id
        self.at = START
        self.number = 0

    def _next(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at

    def _ids(self) -> dict[str, Any]:
        return {"task_id": str(self.task_id), "chain_id": self.chain_id, "timestamp": self._next()}

    def started(self, *, resumed: bool = False) -> list[ChainEvent]:
        if resumed:
            return [TaskStatusEvent(**self._ids(), state=TaskState.WORKING, resumed=True)]
        return [
            ChainStartedEvent(**self._ids()),
            TaskStatusEvent(**self._ids(), state=TaskState.WORKING),
        ]

    def _step(self, step: ReasoningStep) -> ReasoningStepEvent:
        return ReasoningStepEvent(**self._ids(), step=step, metrics=ChainMetrics())

    def call(self, tool: str, correlation_id: UUID, **fields: Any) -> ReasoningStepEvent:
        self.number += 1
        tool_type = ToolType.LLM if tool == "llm" else ToolType.CUSTOM
        info = ToolCallInfo(
            tool_type=tool_type, tool_name=tool, correlation_id=correlation_id, **fields
        )
        step = ReasoningStep(
            type=StepType.TOOL_CALL, step_number=self.number, timestamp=self.at, tool_call=info
        )
        return self._step(step)

    def result(self, correlation_id: UUID, **fields: Any) -> ReasoningStepEvent:
        self.number += 1
        info = ToolResultInfo(correlation_id=correlation_id, duration_ms=1000, **fields)
        step = ReasoningStep(
            type=StepType.TOOL_RESULT,
            step_number=self.number,
            timestamp=self.at + timedelta(seconds=1),
            tool_result=info,
        )
        return self._step(step)

    def done(self, state: TaskState) -> DoneEvent:
        return DoneEvent(**self._ids(), final_state=state)


def _tracer() -> tuple[RunTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return RunTracer(SimpleSpanProcessor(exporter)), exporter


def _ns(at: datetime) -> int:
    return int(at.timestamp()) * 10**9


def _named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def test_tracing_is_off_without_an_endpoint() -> None:
    assert RunTracer.from_settings(Settings()) is None


def test_a_run_is_a_trace_named_by_its_task_with_a_span_per_call() -> None:
    tracer, exporter = _tracer()
    task_id, chain_id = uuid4(), uuid4()
    run = Run(task_id, chain_id)
    trace = tracer.trace(task_id, TENANT, chain_id, "helper@2")
    llm, tool = uuid4(), uuid4()
    trace.observe(run.started())
    called = run.call("llm", llm, model="fake-model", provider="openai")
    answered = run.result(
        llm,
        success=True,
        model="fake-model-0613",
        provider="openai",
        input_tokens=100,
        output_tokens=20,
        cost_usd=Decimal("0.00014"),
    )
    trace.observe([called])
    trace.observe([answered, run.call("lookup", tool)])
    trace.observe([run.result(tool, success=True), run.done(TaskState.COMPLETED)])

    spans = exporter.get_finished_spans()
    (task,) = _named(spans, "invoke_agent")
    (chat,) = _named(spans, "chat ")
    (lookup,) = _named(spans, "execute_tool ")
    assert len(spans) == 3
    assert task.context.trace_id == task_id.int
    assert task.context.span_id == first_span_id(task_id)
    assert task.parent is None
    assert chat.parent is not None
    assert chat.parent.span_id == task.context.span_id
    assert lookup.parent is not None
    assert lookup.parent.span_id == task.context.span_id
    assert task.name == "invoke_agent helper@2"
    assert chat.name == "chat fake-model"
    ids = {"omniforge.tenant_id": TENANT, "omniforge.task_id": str(task_id)}
    for span in spans:
        assert span.attributes is not None
        assert {**span.attributes, **ids} == dict(span.attributes)
        assert span.attributes["omniforge.chain_id"] == str(chain_id)
    assert dict(chat.attributes or {}) | {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "fake-model",
        "gen_ai.response.model": "fake-model-0613",
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "omniforge.cost_usd": 0.00014,
    } == dict(chat.attributes or {})
    assert (lookup.attributes or {})["gen_ai.tool.name"] == "lookup"
    assert (lookup.attributes or {})["gen_ai.tool.call.id"] == str(tool)
    assert (task.attributes or {})["gen_ai.usage.input_tokens"] == 100
    assert (task.attributes or {})["omniforge.cost_usd"] == 0.00014
    assert (task.attributes or {})["omniforge.final_state"] == "completed"
    # The steps' own times: the call from its call step to its result step.
    assert chat.start_time == _ns(called.step.timestamp)
    assert chat.end_time == _ns(answered.step.timestamp)
    assert task.status.status_code is StatusCode.UNSET


def test_a_resumed_run_goes_on_in_the_same_trace_as_a_child_of_the_first() -> None:
    tracer, exporter = _tracer()
    task_id, chain_id = uuid4(), uuid4()
    first, second = Run(task_id, chain_id), Run(task_id, chain_id)
    under_way, later = uuid4(), uuid4()
    before = tracer.trace(task_id, TENANT, chain_id, "default")
    before.observe([*first.started(), first.call("llm", under_way, model="m")])
    before.close()  # handed over mid-call
    after = tracer.trace(task_id, TENANT, chain_id, "default")
    after.observe(second.started(resumed=True))
    after.observe([second.result(under_way, success=True), second.call("llm", later, model="m")])
    after.observe([second.result(later, success=True), second.done(TaskState.COMPLETED)])

    spans = exporter.get_finished_spans()
    runs = _named(spans, "invoke_agent")
    assert [span.attributes and span.attributes["omniforge.resumed"] for span in runs] == [
        False,
        True,
    ]
    one, two = runs
    assert {span.context.trace_id for span in spans} == {task_id.int}
    assert (one.attributes or {})["omniforge.handed_over"] is True
    assert two.parent is not None
    assert two.parent.span_id == one.context.span_id
    calls = _named(spans, "chat ")
    assert [(call.parent and call.parent.span_id) for call in calls] == [
        one.context.span_id,
        two.context.span_id,
    ]
    # The call under way when the run left ended with it; its result, recorded by the next
    # run, makes no second span.
    assert (calls[0].attributes or {})["error.type"] == "abandoned"
    assert len(spans) == 4


def test_a_failed_call_and_a_failed_run_set_an_error_status_without_their_messages() -> None:
    tracer, exporter = _tracer()
    task_id, chain_id = uuid4(), uuid4()
    run = Run(task_id, chain_id)
    call = uuid4()
    trace = tracer.trace(task_id, TENANT, chain_id, "default")
    trace.observe([*run.started(), run.call("lookup", call)])
    failed = ChainFailedEvent(
        task_id=str(task_id),
        chain_id=chain_id,
        error_code=ErrorCode.TOOL_ERROR,
        error_message="token sk-live-123 refused",
        metrics=ChainMetrics(),
    )
    trace.observe(
        [
            run.result(
                call, success=False, error="token sk-live-123 refused", error_code="tool_error"
            ),
            failed,
            run.done(TaskState.FAILED),
        ]
    )
    spans = exporter.get_finished_spans()
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "tool_error"
        assert (span.attributes or {})["error.type"] == "tool_error"
    assert "sk-live" not in repr([dict(span.attributes or {}) for span in spans])


def test_steps_another_chain_made_make_no_span() -> None:
    tracer, exporter = _tracer()
    task_id, chain_id = uuid4(), uuid4()
    run = Run(task_id, chain_id)
    copied, live = uuid4(), uuid4()
    trace = tracer.trace(task_id, TENANT, chain_id, "default")
    call, result = run.call("llm", copied, model="m"), run.result(copied, success=True)
    call.step.copied_from, result.step.copied_from = uuid4(), uuid4()
    trace.observe([*run.started(), call, result, run.call("llm", live, model="m")])
    trace.observe([run.result(live, success=True), run.done(TaskState.COMPLETED)])

    spans = exporter.get_finished_spans()
    assert len(_named(spans, "chat ")) == 1
    assert len(spans) == 2
