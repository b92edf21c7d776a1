"""A task's stream as A2A streaming events: one `TaskStatusUpdateEvent` per change of the
task's A2A state, the answer as a `TaskArtifactUpdateEvent`, the end as the final status
(with the answer, or why it failed, as its message).

Every event carries the extension's usage (the task's running totals as its stream last
reported them) and `event_id`, the seq of the stream event it came from. The mapper is fed
the stream from its start, so the events after any id are the same however the stream was
read: what a resumed subscription gets is exactly what the lost one would have sent."""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from a2a.server.events import Event
from a2a.types import a2a_pb2 as a2a

from app.api.a2a.mapping import (
    STATES,
    agent_message,
    answer_artifact,
    approval_text,
    context_id,
    failure_text,
    final_message,
    metadata,
    timestamp,
    usage_of,
)
from app.chain import ChainMetrics, TaskState
from app.runs.channel import StreamEvent
from app.storage.records import TaskRecord

_METRICS_EVENTS = frozenset({"budget_warning", "chain_completed", "chain_failed"})


@dataclass
class StreamMapper:
    """Follows one task's stream events in order (`feed`) and says which A2A events each one
    makes. `state` is the task's state as its stream says so far."""

    task: TaskRecord
    state: TaskState | None = None
    metrics: ChainMetrics = field(default_factory=ChainMetrics)
    answer: str | None = None
    failure: str | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    message: a2a.Message | None = None
    ended: bool = False

    @property
    def task_id(self) -> str:
        return str(self.task.id)

    @property
    def paused(self) -> bool:
        """Ended, or waiting for a human: where a blocking `SendMessage` answers."""
        return self.ended or self.state is TaskState.INPUT_REQUIRED

    def feed(self, event: StreamEvent) -> Event | None:
        """The A2A event `event` makes, if any."""
        if event.type == "reasoning_step":
            if event.step is not None:
                self.metrics = ChainMetrics.model_validate_json(event.step.metrics)
            return None
        data: dict[str, Any] = json.loads(event.data)
        if event.type in _METRICS_EVENTS:
            self.metrics = ChainMetrics.model_validate(data["metrics"])
        match event.type:
            case "task_status":
                state = TaskState(data["state"])
                if state is not TaskState.INPUT_REQUIRED:
                    self.approvals = []
                return self._status(state, event.seq, data["timestamp"])
            case "approval_required":
                self.approvals.append(data)
            case "chain_completed":
                self.answer = data.get("answer")
                if self.answer:
                    return a2a.TaskArtifactUpdateEvent(
                        task_id=self.task_id,
                        context_id=context_id(self.task),
                        artifact=answer_artifact(self.answer),
                        last_chunk=True,
                        metadata=self._metadata(event.seq),
                    )
            case "chain_failed":
                self.failure = failure_text(data["error_code"], data["error_message"])
            case "done":
                self.ended = True
                final_state = TaskState(data["final_state"])
                return self._status(final_state, event.seq, data["timestamp"], final=True)
        return None

    def _status(self, state: TaskState, seq: int, at: str, *, final: bool = False) -> Event | None:
        if not final and self.state is not None and STATES[state] == STATES[self.state]:
            return None  # no change an A2A client could see (resumed after an approval)
        self.state = state
        self.message = self._message(state)
        stamp = timestamp(datetime.fromisoformat(at))
        status = a2a.TaskStatus(state=STATES[state], timestamp=stamp)
        if self.message is not None:
            status.message.CopyFrom(self.message)
        return a2a.TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=context_id(self.task),
            status=status,
            metadata=self._metadata(seq),
        )

    def _message(self, state: TaskState) -> a2a.Message | None:
        if state is TaskState.INPUT_REQUIRED:
            text = approval_text(self.task_id, self.approvals)
            return agent_message(
                self.task_id, context_id(self.task), text, f"{self.task_id}:input-required"
            )
        if state.is_terminal:
            return final_message(
                self.task_id,
                context_id(self.task),
                state,
                answer=self.answer,
                failure=self.failure,
            )
        return None

    def _metadata(self, seq: int) -> Any:
        return metadata(usage_of(self.metrics, event_id=seq))
