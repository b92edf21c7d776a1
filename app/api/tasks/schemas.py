"""Task resources as clients see them."""

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.chain import Budget, ChainMetrics, ErrorCode, TaskState
from app.chain.replay import ReplayMatch, ReplayReport
from app.runs.models import MAX_INPUT_CHARS, AgentRef
from app.runs.trails import REMOTE_AGENT
from app.storage.records import TaskRecord

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
"""Visible ASCII, up to 255 characters (a UUID is the usual choice)."""
REPLAYED_HEADER = "Idempotent-Replayed"


def stream_url(task_id: UUID) -> str:
    return f"/api/v1/tasks/{task_id}/events"


class TaskAccepted(BaseModel):
    task_id: UUID
    chain_id: UUID
    status: TaskState
    stream_url: str


class ReplayRequest(BaseModel):
    """A replay of a finished task: run again with every LLM and tool result taken from its
    chain (no model or tool is called, nothing is billed), compared step for step."""

    model_config = ConfigDict(extra="forbid")

    agent: AgentRef | None = Field(
        default=None,
        description="The agent version to replay with (default: the one the task ran): pin a "
        "new version to see what its changes do against the recorded replies.",
    )
    match: ReplayMatch = Field(
        default=ReplayMatch.REQUESTS,
        description="What each step must repeat: `requests` (everything, the requests sent "
        "to models included: a changed prompt shows at the first LLM call) or `actions` (the "
        "agent's tool calls, thoughts and answers; models get the recorded replies anyway: a "
        "check of parsers and of what the agent does with the same replies).",
    )


class ForkRequest(BaseModel):
    """A fork of a task: its steps up to `from_step` as recorded (not billed again), then on
    live with the changes given."""

    model_config = ConfigDict(extra="forbid")

    from_step: int = Field(
        ge=1,
        le=2**31 - 1,
        description="The last step taken as recorded; not between a call and its result.",
    )
    agent: AgentRef | None = Field(
        default=None, description="The agent version that goes on (default: the task's)."
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="The model of the live calls (default: the task's).",
    )
    input: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_INPUT_CHARS,
        description="A new input for the live part (default: the task's input or messages).",
    )


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
    answer: str | None = Field(
        description="The agent's answer (the stream's `done` event and webhooks call it "
        "`answer` too); null until the task ends with one."
    )
    result: str | None = Field(
        deprecated="`result` is the old name of `answer`, kept for one release.",
        description="Deprecated: the same as `answer`, under its old name.",
    )
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
    schedule_id: UUID | None = Field(
        default=None, description="The schedule whose firing made it (null: submitted)."
    )
    replayed_from: UUID | None = Field(
        default=None, description="The task this one replays (every result from its chain)."
    )
    replay_report: ReplayReport | None = Field(
        default=None,
        description="A replay's outcome, once it has ended: whether it reproduced its task's "
        "chain step for step, else the first step where it diverged and how.",
    )
    forked_from: UUID | None = Field(
        default=None, description="The task this one forks (its steps up to `fork_step`)."
    )
    fork_step: int | None = None
    parent_task_id: UUID | None = Field(
        default=None,
        description="A sub-agent's task: the task whose call started it (`parent_step_id`, "
        "that call's `tool_call` step).",
    )
    parent_step_id: UUID | None = None
    root_task_id: UUID | None = Field(
        default=None, description="A sub-agent's task: its family's first task."
    )
    depth: int = Field(
        default=0, description="0 for a task a caller submitted, 1 for its sub-agents' tasks..."
    )
    remote_agent: str | None = Field(
        default=None,
        description="A remote A2A agent's task as this service records it, under the call "
        "that sent it: the remote agent's name (its steps are the remote task's updates, "
        "its answer the remote's; `agent` is null).",
    )
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
            answer=task.final_answer,
            result=task.final_answer,
            output=task.output,
            stop_reason=task.stop_reason,
            error_code=task.error_code,
            error_message=task.error_message,
            usage=task.usage,
            user_id=task.user_id,
            schedule_id=task.schedule_id,
            replayed_from=task.replayed_from,
            replay_report=task.replay_report,
            forked_from=task.forked_from,
            fork_step=task.fork_step,
            parent_task_id=task.parent_task_id,
            parent_step_id=task.parent_step_id,
            root_task_id=task.root_task_id,
            depth=task.depth,
            remote_agent=request.get(REMOTE_AGENT),
            created_at=task.created_at,
            started_at=task.started_at,
            finished_at=task.finished_at,
            stream_url=stream_url(task.id),
        )


class TaskPage(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None
