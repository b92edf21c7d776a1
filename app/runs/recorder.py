"""Turns a run's events into the rows that record them and the stream events that announce
them. A step is serialized once, storable (`app.storage.text`): the same JSON is stored and
streamed, so a replay says exactly what was streamed live."""

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID

from app.agents import Relayed, RunEvent
from app.chain import (
    ApprovalDecidedEvent,
    ApprovalRequiredEvent,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainMetrics,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    ReasoningStepEvent,
    StepType,
    TaskState,
    TaskStatusEvent,
    ToolProgressEvent,
    ToolType,
    VisibilityLevel,
)
from app.chain.models import utc_now
from app.observability.tracing import RunTrace
from app.resources.webhooks.subscriptions import RunWebhooks
from app.runs.audit import ToolAuditor
from app.runs.channel import Relay, StepParts, StreamEvent
from app.security.visibility import StepFacts
from app.storage.records import RELAYED, StoredEvent, StoredRelay, StoredStep
from app.storage.runs import Fence, RunWrite
from app.storage.runs.rows import AuditRow, CostRow, EventRow, StepRow
from app.storage.text import dump_model, storable
from app.storage.types import RawJSON
from app.tools.recording import CostRecord


def step_event_data(
    task_id: UUID | str,
    chain_id: UUID,
    timestamp: datetime,
    step: str,
    metrics: str,
    relay: Relay | None = None,
) -> str:
    """The `reasoning_step` event's JSON (the fields of `ReasoningStepEvent`, in its order)
    around already-serialized step and metrics; a relayed step's marked as such."""
    stamp = timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z")
    marks = "" if relay is None else relay.fields
    return (
        f'{{"task_id":{json.dumps(str(task_id))},"chain_id":"{chain_id}",'
        f'"timestamp":"{stamp}","type":"reasoning_step","step":{step},"metrics":{metrics}'
        f"{marks}}}"
    )


def step_facts(
    step_type: str, tool_type: str | None, tool_name: str | None, level: str
) -> StepFacts:
    """A stored step's facts, from its row's columns."""
    return StepFacts(
        type=StepType(step_type),
        tool_type=None if tool_type is None else ToolType(tool_type),
        tool_name=tool_name,
        level=VisibilityLevel(level),
    )


def step_stream_event(seq: int, parts: StepParts) -> StreamEvent:
    data = step_event_data(
        parts.task_id, parts.chain_id, parts.timestamp, parts.step, parts.metrics, parts.relay
    )
    return StreamEvent(seq, "reasoning_step", data, parts, relay=parts.relay)


@dataclass(frozen=True, slots=True)
class ChildEvent:
    """A sub-agent's stream event (numbered in its own stream) on its way into an
    ancestor's: what the ancestor's run relays."""

    relay: Relay
    event: StreamEvent

    @property
    def pointer(self) -> str:
        """The `RELAYED` row's data: where the event is stored, and its marks."""
        relay = self.relay
        return json.dumps(
            {
                "task_id": str(relay.task_id),
                "chain_id": str(relay.chain_id),
                "seq": self.event.seq,
                "depth": relay.depth,
                "parent_step_id": None
                if relay.parent_step_id is None
                else str(relay.parent_step_id),
                "calls": [
                    [call.type, call.tool_type, call.tool_name, call.level] for call in relay.calls
                ],
            },
            separators=(",", ":"),
        )


def own_events(batch: list[RunEvent]) -> list[ChainEvent]:
    """A run's own events among those of a batch (without those relayed into its stream)."""
    return [event for event in batch if not isinstance(event, Relayed)]


def relayed_event(seq: int, event: StreamEvent, relay: Relay) -> StreamEvent:
    """A sub-agent's event as its ancestor's stream carries it: numbered there, marked with
    the child's depth and the call step that started it (its task and chain ids are the
    child's), shown to each reader as the child's own stream shows it."""
    if event.step is not None:
        return step_stream_event(seq, replace(event.step, relay=relay))
    data = f"{event.data[:-1]}{relay.fields}}}"
    return StreamEvent(seq, event.type, data, progress=event.progress, relay=relay)


def stream_event(
    task_id: UUID, chain_id: UUID, stored: StoredEvent | StoredStep | StoredRelay
) -> StreamEvent:
    """A stored event as it streamed live (a relay whose child's event is gone stays a bare
    `relayed` event, which no stream sends)."""
    if isinstance(stored, StoredRelay):
        calls = tuple(step_facts(*call) for call in stored.calls)
        relay = Relay(stored.task_id, stored.chain_id, stored.depth, stored.parent_step_id, calls)
        child = stream_event(stored.task_id, stored.chain_id, stored.event)
        return relayed_event(stored.seq, child, relay)
    if isinstance(stored, StoredStep):
        facts = step_facts(stored.type, stored.tool_type, stored.tool_name, stored.visibility)
        parts = StepParts(task_id, chain_id, stored.timestamp, stored.step, stored.metrics, facts)
        return step_stream_event(stored.seq, parts)
    if stored.type in CALL_EVENTS:
        progress = json.loads(stored.data)
        facts = progress_facts(progress["tool_type"], progress["tool_name"], progress["visibility"])
        return StreamEvent(stored.seq, stored.type, stored.data, progress=facts)
    return StreamEvent(stored.seq, stored.type, stored.data)


PROGRESS = "tool_progress"
APPROVAL_REQUIRED = "approval_required"
APPROVAL_DECIDED = "approval_decided"
CALL_EVENTS = frozenset({PROGRESS, APPROVAL_REQUIRED, APPROVAL_DECIDED})
"""Events about one call, seen by a reader as it sees the call's step."""


def facts_of(step: ReasoningStep) -> StepFacts:
    """A step's facts, as its row stores them."""
    tool = step.tool_call or step.tool_result  # a result names its call's tool
    return StepFacts(
        type=StepType(step.type),
        tool_type=None if tool is None else tool.tool_type,
        tool_name=None if tool is None else tool.tool_name,
        level=VisibilityLevel(step.visibility.level),
    )


def progress_facts(tool_type: str, tool_name: str, level: str) -> StepFacts:
    """A `tool_progress` event is seen as its call's step is."""
    return step_facts(StepType.TOOL_CALL, tool_type, tool_name, level)


def _storable(text: str | None) -> str | None:
    return None if text is None else storable(text)


def closing_events(
    task_id: UUID,
    chain_id: UUID,
    *,
    status: TaskState,
    error_code: ErrorCode,
    message: str,
    metrics: ChainMetrics,
    at: datetime,
) -> list[ChainFailedEvent | DoneEvent]:
    """The events that end a run its own agent cannot end: `chain_failed`, then `done`."""
    return [
        ChainFailedEvent(
            task_id=str(task_id),
            chain_id=chain_id,
            timestamp=at,
            error_code=error_code,
            error_message=message,
            metrics=metrics,
        ),
        DoneEvent(task_id=str(task_id), chain_id=chain_id, timestamp=at, final_state=status),
    ]


def event_row(task_id: UUID, tenant_id: str, seq: int, event_type: str, data: str) -> EventRow:
    """A `task_events` row of a stored (non-step) event."""
    return {
        "task_id": task_id,
        "seq": seq,
        "tenant_id": tenant_id,
        "type": event_type,
        "data": RawJSON(data),
    }


class RunRecorder:
    """Numbers one run's events (the stream's gap-free `seq`) and builds each batch's write,
    with an audit event for every tool call."""

    def __init__(
        self,
        task_id: UUID,
        tenant_id: str,
        chain: ReasoningChain,
        auditor: ToolAuditor,
        *,
        fence: Fence,
        last_seq: int = 0,
        trace: RunTrace | None = None,
        webhooks: RunWebhooks | None = None,
        seen_as: tuple[ToolType, str] | None = None,
    ) -> None:
        self.task_id = task_id
        self.tenant_id = tenant_id
        self.chain = chain
        # The run's hold on its task: every write it makes is conditional on it.
        self.fence = fence
        # A resumed run numbers on from its task's last stored event.
        self.last_seq = last_seq
        self._auditor = auditor
        # The state the run ended in, once its `done` is recorded.
        self.final_state: TaskState | None = None
        # Its spans, when tracing is on (None costs one `if` per batch).
        self.trace = trace
        # Who hears of its end (webhooks); None, the usual case, costs one `if` per batch.
        self.webhooks = webhooks
        # A remote agent's task recorded under a call: its steps are seen as that call's
        # tool's (its type and name stored with them).
        self._seen_as = seen_as
        # How its task ended, as its last write stores it (`TaskRecord` fields), once its
        # chain's end and `done` are recorded.
        self.outcome: dict[str, Any] | None = None
        self._ending: dict[str, Any] = {}

    def record(
        self, batch: list[RunEvent], costs: list[CostRecord]
    ) -> tuple[RunWrite, list[StreamEvent]]:
        write = RunWrite(self.task_id, self.chain.id, self.fence, self.last_seq, self.last_seq)
        published: list[StreamEvent] = []
        latest_metrics: str | None = None
        relays = False
        for event in batch:
            self.last_seq += 1
            seq = self.last_seq
            if isinstance(event, Relayed):
                child = event.event
                assert isinstance(child, ChildEvent)
                write.events.append(
                    event_row(self.task_id, self.tenant_id, seq, RELAYED, child.pointer)
                )
                published.append(relayed_event(seq, child.event, child.relay))
                relays = True
                continue
            if isinstance(event, ReasoningStepEvent):
                step_json = dump_model(event.step)
                latest_metrics = dump_model(event.metrics)
                facts = self._facts(event)
                write.steps.append(self._step_row(seq, event, step_json, latest_metrics, facts))
                audit = self._auditor.observe(event.step, step_json, facts, event.timestamp)
                if audit is not None:
                    write.audits.append(cast(AuditRow, {**audit, "tenant_id": self.tenant_id}))
                parts = StepParts(
                    self.task_id, self.chain.id, event.timestamp, step_json, latest_metrics, facts
                )
                published.append(step_stream_event(seq, parts))
                continue
            data = dump_model(event)
            write.events.append(event_row(self.task_id, self.tenant_id, seq, event.type, data))
            self._apply(event, write)
            if isinstance(event, ToolProgressEvent | ApprovalRequiredEvent | ApprovalDecidedEvent):
                facts = progress_facts(event.tool_type, event.tool_name, event.visibility)
                published.append(StreamEvent(seq, event.type, data, progress=facts))
            else:
                published.append(StreamEvent(seq, event.type, data))
        if (latest_metrics is not None or relays) and "metrics" not in write.chain_changes:
            if self.chain.running_children:
                # Stored with what its sub-agents used so far, so that its task's usage grows
                # as theirs does.
                latest_metrics = dump_model(self.chain.family_metrics())
            if latest_metrics is not None:
                write.chain_changes["metrics"] = RawJSON(latest_metrics)
        write.costs = [self._cost_row(record) for record in costs]
        write.last_seq = self.last_seq
        own = own_events(batch) if relays else cast(list[ChainEvent], batch)
        if self.trace is not None:
            self.trace.observe(own)
        if self.webhooks is not None:
            write.deliveries = [row for event in own for row in self.webhooks.rows(event)]
        return write, published

    def end(
        self, stored_seq: int, *, error_code: ErrorCode, message: str, costs: list[CostRow]
    ) -> tuple[RunWrite, list[StreamEvent], list[ChainEvent]]:
        """The write that ends this run `failed` here and now, for a reason outside its agent
        (its events could not be stored): its closing events numbered right after the last
        stored one, `stored_seq`, and `costs` (rows of writes that could not be stored) kept,
        so that nothing spent goes unbilled."""
        now = utc_now()
        events = closing_events(
            self.task_id,
            self.chain.id,
            status=TaskState.FAILED,
            error_code=error_code,
            message=message,
            metrics=self.chain.metrics,
            at=now,
        )
        write = RunWrite(
            self.task_id, self.chain.id, self.fence, stored_seq, stored_seq, costs=costs
        )
        self.final_state = TaskState.FAILED
        published: list[StreamEvent] = []
        self.last_seq = stored_seq
        for event in events:
            self.last_seq += 1
            data = dump_model(event)
            write.events.append(
                event_row(self.task_id, self.tenant_id, self.last_seq, event.type, data)
            )
            published.append(StreamEvent(self.last_seq, event.type, data))
        write.last_seq = self.last_seq
        if self.trace is not None:
            self.trace.observe(events)
        if self.webhooks is not None:
            write.deliveries = [row for event in events for row in self.webhooks.rows(event)]
        failure = {"error_code": error_code, "error_message": storable(message)}
        write.task_changes.update(status=TaskState.FAILED, finished_at=now, **failure)
        write.chain_changes.update(
            status=ChainStatus.FAILED,
            metrics=RawJSON(dump_model(self.chain.metrics)),
            completed_at=now,
            **failure,
        )
        return write, published, list(events)

    def _apply(self, event: ChainEvent, write: RunWrite) -> None:
        if isinstance(event, TaskStatusEvent):
            write.task_changes["status"] = event.state
            if event.state is TaskState.WORKING:
                if not event.resumed:  # a resumed run's task started before
                    write.task_changes["started_at"] = event.timestamp
                write.chain_changes["status"] = ChainStatus.THINKING
        elif isinstance(event, ChainCompletedEvent | ChainFailedEvent):
            chain = self.chain
            write.chain_changes.update(
                status=chain.status,
                metrics=RawJSON(dump_model(event.metrics)),
                error_code=chain.error_code,
                error_message=_storable(chain.error_message),
                completed_at=chain.completed_at,
            )
            answered = chain.status in (ChainStatus.COMPLETED, ChainStatus.INCOMPLETE)
            answer = event.answer if isinstance(event, ChainCompletedEvent) else None
            completed = event if isinstance(event, ChainCompletedEvent) else None
            self._ending = {
                "usage": event.metrics,
                "final_answer": answer if answered else None,
                "error_code": chain.error_code,
                "error_message": chain.error_message,
                "output": None if completed is None else completed.output,
                "stop_reason": None if completed is None else completed.stop_reason,
            }
            write.task_changes.update(
                final_answer=_storable(answer) if answered else None,
                error_code=chain.error_code,
                error_message=_storable(chain.error_message),
            )
            if chain.replay_report is not None:
                write.task_changes["replay_report"] = RawJSON(dump_model(chain.replay_report))
            if isinstance(event, ChainCompletedEvent):
                write.task_changes["stop_reason"] = event.stop_reason
                if event.output is not None:
                    # Made storable (NUL, lone surrogates) by the engine's JSON serializer.
                    output = json.dumps(event.output, ensure_ascii=False, allow_nan=False)
                    write.task_changes["output"] = RawJSON(output)
        elif isinstance(event, DoneEvent):
            self.final_state = event.final_state
            write.task_changes.update(status=event.final_state, finished_at=event.timestamp)
            self.outcome = {
                **self._ending,
                "status": event.final_state,
                "finished_at": event.timestamp,
                "last_seq": self.last_seq,
            }

    def _facts(self, event: ReasoningStepEvent) -> StepFacts:
        step = event.step
        tool = step.tool_call or step.tool_result  # a result names its call's tool
        if tool is None and self._seen_as is not None:
            return StepFacts(
                StepType(step.type), *self._seen_as, VisibilityLevel(step.visibility.level)
            )
        return StepFacts(
            type=StepType(step.type),
            tool_type=None if tool is None else tool.tool_type,
            tool_name=None if tool is None else tool.tool_name,
            level=VisibilityLevel(step.visibility.level),
        )

    def _step_row(
        self,
        seq: int,
        event: ReasoningStepEvent,
        step_json: str,
        metrics_json: str,
        facts: StepFacts,
    ) -> StepRow:
        step = event.step
        return {
            "chain_id": self.chain.id,
            "step_number": step.step_number,
            "id": step.id,
            "tenant_id": self.tenant_id,
            "seq": seq,
            "type": step.type,
            "tool_type": facts.tool_type,
            "tool_name": facts.tool_name,
            "visibility": step.visibility.level,
            "timestamp": step.timestamp,
            "data": RawJSON(step_json),
            "metrics": RawJSON(metrics_json),
        }

    def _cost_row(self, record: CostRecord) -> CostRow:
        return {
            "tenant_id": record.tenant_id or self.tenant_id,
            "user_id": record.user_id,
            "task_id": self.task_id,
            "chain_id": record.chain_id,
            "step_id": record.step_id,
            "correlation_id": record.correlation_id,
            "tool_name": record.tool_name,
            "tool_type": record.tool_type,
            "model": record.model,
            "deployment": record.deployment,
            "provider": record.provider,
            "input_tokens": record.input_tokens,
            "output_tokens": record.output_tokens,
            "cost_usd": record.cost_usd,
            "unpriced": record.unpriced,
            "recorded_at": record.recorded_at,
            "strategy": record.strategy,
            "sandbox_s": record.sandbox_s,
        }
