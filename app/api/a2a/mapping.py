"""Our tasks as A2A v1.0 objects: states, the task itself, its answer and its failure, and
the usage-and-cost extension every one of them carries.

A task's `context_id` is its conversation; a task outside any conversation (one submitted
over REST without one) is its own context, named by its id."""

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from a2a.types import a2a_pb2 as a2a
from google.protobuf.struct_pb2 import Struct  # type: ignore[import-untyped]
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]

from app.chain import ChainMetrics, TaskState
from app.storage.records import TaskRecord
from app.tools.a2a.extension import FamilyUsage

STATES: dict[TaskState, a2a.TaskState] = {
    TaskState.SUBMITTED: a2a.TASK_STATE_SUBMITTED,
    TaskState.WORKING: a2a.TASK_STATE_WORKING,
    TaskState.INPUT_REQUIRED: a2a.TASK_STATE_INPUT_REQUIRED,
    TaskState.COMPLETED: a2a.TASK_STATE_COMPLETED,
    # A limit stopped it, and it answered from what it had: an answer all the same.
    TaskState.INCOMPLETE: a2a.TASK_STATE_COMPLETED,
    TaskState.FAILED: a2a.TASK_STATE_FAILED,
    TaskState.CANCELLED: a2a.TASK_STATE_CANCELED,
}

OUR_STATES: dict[a2a.TaskState, tuple[TaskState, ...]] = {}
for _ours, _theirs in STATES.items():
    OUR_STATES[_theirs] = (*OUR_STATES.get(_theirs, ()), _ours)

ANSWER_ARTIFACT = "answer"
"""The id of the artifact that holds a task's final answer."""

TEXT = "text/plain"


def context_id(task: TaskRecord) -> str:
    return str(task.conversation_id or task.id)


def usage_of(metrics: ChainMetrics, *, event_id: int | None = None) -> FamilyUsage:
    """The extension's usage of a task from its chain's running totals."""
    return FamilyUsage(
        input_tokens=metrics.input_tokens,
        output_tokens=metrics.output_tokens,
        total_tokens=metrics.total_tokens,
        llm_calls=metrics.llm_calls,
        cost_usd=metrics.total_cost_usd,
        unpriced_calls=metrics.unpriced_calls,
        event_id=event_id if event_id else None,
    )


def metadata(usage: FamilyUsage) -> Struct:
    """The `metadata` of an A2A object that carries `usage` (the cost as a decimal string:
    a Struct's numbers are doubles)."""
    struct = Struct()
    struct.update(usage.metadata())
    return struct


def timestamp(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp


def agent_message(task_id: str, context: str, text: str, message_id: str) -> a2a.Message:
    """A message of the agent; `message_id` is stable, so a message sent twice (a resumed
    subscription, a `GetTask`) is recognisably the same."""
    return a2a.Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context,
        role=a2a.ROLE_AGENT,
        parts=[a2a.Part(text=text, media_type=TEXT)],
    )


def answer_artifact(answer: str) -> a2a.Artifact:
    return a2a.Artifact(
        artifact_id=ANSWER_ARTIFACT,
        name="answer",
        description="The agent's final answer.",
        parts=[a2a.Part(text=answer, media_type=TEXT)],
    )


def failure_text(error_code: str, error_message: str) -> str:
    return f"{error_code}: {error_message}"


def approval_text(task_id: UUID | str, approvals: list[dict[str, Any]]) -> str:
    """What an `INPUT_REQUIRED` status says: A2A cannot carry a decision, our REST API can."""
    route = f"POST /api/v1/tasks/{task_id}/approvals"
    calls = ", ".join(
        f"{item.get('tool_name')} ({route}/{item.get('approval_id')})" for item in approvals
    )
    waiting = f"tool calls wait for a human's approval: {calls}" if calls else "waits for approval"
    return f"The task {waiting}; decide with `task:approve` over the REST API."


def final_message(
    task_id: str, context: str, state: TaskState, *, answer: str | None, failure: str | None
) -> a2a.Message | None:
    """The status message of a task that ended: its answer, or why it failed."""
    if state in (TaskState.COMPLETED, TaskState.INCOMPLETE) and answer:
        return agent_message(task_id, context, answer, f"{task_id}:answer")
    if failure:
        return agent_message(task_id, context, failure, f"{task_id}:{state}")
    return None


def input_message(task: TaskRecord) -> a2a.Message:
    """What the task was asked, as the user's message: its input, or its user messages'
    text."""
    request = task.request
    text = request.get("input")
    if not isinstance(text, str):
        parts = [
            message.get("content")
            for message in request.get("messages") or []
            if isinstance(message, dict) and message.get("role") == "user"
        ]
        text = "\n".join(part if isinstance(part, str) else json.dumps(part) for part in parts)
    return a2a.Message(
        message_id=f"{task.id}:input",
        task_id=str(task.id),
        context_id=context_id(task),
        role=a2a.ROLE_USER,
        parts=[a2a.Part(text=text, media_type=TEXT)],
    )


def task_status(
    task: TaskRecord, state: TaskState | None = None, message: a2a.Message | None = None
) -> a2a.TaskStatus:
    """The task's status: as stored, or as its stream already says (`state`, `message`)."""
    state = state or task.status
    if message is None and state.is_terminal:
        failure = None
        if task.error_code is not None:
            failure = failure_text(task.error_code, task.error_message or "")
        message = final_message(
            str(task.id), context_id(task), state, answer=task.final_answer, failure=failure
        )
    status = a2a.TaskStatus(
        state=STATES[state],
        timestamp=timestamp(task.finished_at or task.started_at or task.created_at),
    )
    if message is not None:
        status.message.CopyFrom(message)
    return status


def a2a_task(
    task: TaskRecord,
    *,
    state: TaskState | None = None,
    message: a2a.Message | None = None,
    event_id: int | None = None,
) -> a2a.Task:
    """The A2A task of ours: its status (see `task_status`), its answer as an artifact once
    answered, its history (the input, and the answer), and its usage so far."""
    status = task_status(task, state, message)
    history = [input_message(task)]
    artifacts = []
    if status.state == a2a.TASK_STATE_COMPLETED and task.final_answer:
        artifacts.append(answer_artifact(task.final_answer))
        if status.HasField("message"):
            history.append(status.message)
    return a2a.Task(
        id=str(task.id),
        context_id=context_id(task),
        status=status,
        artifacts=artifacts,
        history=history,
        metadata=metadata(usage_of(task.usage, event_id=event_id)),
    )
