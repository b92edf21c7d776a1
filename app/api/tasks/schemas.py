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


class TaskOut(BaseModel):
    """A task: what was asked, where it stands, its answer and its usage so far."""

    id: UUID
    status: TaskState
    chain_id: UUID
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
            model=task.model,
            input=request.get("input"),
            messages=request.get("messages"),
            tools=request.get("tools"),
            budget=task.budget,
            metadata=request.get("metadata", {}),
            result=task.final_answer,
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
