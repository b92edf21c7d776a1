"""Task resources as clients see them."""

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from app.chain import Budget, ChainMetrics, ErrorCode, TaskState
from app.storage.records import TaskRecord


def stream_url(task_id: UUID) -> str:
    return f"/api/v1/tasks/{task_id}/events"


class TaskAccepted(BaseModel):
    task_id: UUID
    chain_id: UUID
    status: TaskState
    stream_url: str


class AgentVersionRef(BaseModel):
    """The exact agent version a task ran."""

    name: str
    version: int


class TaskOut(BaseModel):
    """A task: what was asked, where it stands, its answer and its usage so far."""

    id: UUID
    status: TaskState
    chain_id: UUID
    agent: AgentVersionRef | None = Field(
        default=None, description="The agent version it ran (null on tasks from before agents)."
    )
    conversation_id: UUID | None = None
    turn: int | None = Field(default=None, description="Its turn in its conversation, from 1.")
    model: str
    input: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[str] | None = None
    budget: Budget | None = Field(
        default=None,
        description="The task's effective budget: its own limits over its tenant's defaults.",
    )
    metadata: dict[str, Any]
    result: str | None
    output: Any = Field(
        default=None,
        description="The answer as JSON, valid against its agent's `response_format` (only "
        "for agents that have one).",
    )
    stop_reason: str | None = Field(
        default=None, description="The limit that stopped an `incomplete` task."
    )
    error_code: ErrorCode | None
    error_message: str | None
    usage: ChainMetrics
    user_id: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    stream_url: str

    @classmethod
    def of(cls, task: TaskRecord) -> "TaskOut":
        request = task.request
        return cls(
            id=task.id,
            status=task.status,
            chain_id=task.chain_id,
            agent=None
            if task.agent_name is None or task.agent_version is None
            else AgentVersionRef(name=task.agent_name, version=task.agent_version),
            conversation_id=task.conversation_id,
            turn=task.turn,
            model=task.model,
            input=request.get("input"),
            messages=request.get("messages"),
            tools=request.get("tools"),
            budget=task.budget,
            metadata=request.get("metadata", {}),
            result=task.final_answer,
            output=task.output,
            stop_reason=task.stop_reason,
            error_code=task.error_code,
            error_message=task.error_message,
            usage=task.usage,
            user_id=task.user_id,
            created_at=task.created_at,
            started_at=task.started_at,
            finished_at=task.finished_at,
            stream_url=stream_url(task.id),
        )


class TaskPage(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None
