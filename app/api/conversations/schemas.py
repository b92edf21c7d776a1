"""Conversations as clients see them."""

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from app.api.tasks.schemas import stream_url
from app.chain import ChainMetrics, ErrorCode, TaskState
from app.chain.money import USD
from app.runs.models import MAX_ATTACHED_FILES, MAX_CONVERSATION_FILES, AgentRef, Metadata
from app.storage.records import ConversationRecord, TaskRecord


class ConversationCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"agent": "support-bot"}]}
    )

    agent: AgentRef | None = Field(
        default=None,
        description="The agent it talks to: `name` (each turn runs its newest version) or "
        "`name@N` (every turn runs version N). Default: the built-in `default` agent.",
    )
    metadata: Metadata = Field(default_factory=dict)
    file_ids: list[UUID] | None = Field(
        default=None,
        max_length=MAX_ATTACHED_FILES,
        description="Files of the tenant every turn may read; a turn's own `file_ids` join "
        f"them for that turn and the later ones (at most {MAX_CONVERSATION_FILES} in all).",
    )


class Totals(BaseModel):
    """What every turn used together."""

    turns: int
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    total_cost_usd: USD = Decimal(0)
    unpriced_calls: int


class ConversationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)

    id: UUID
    agent: str = Field(
        validation_alias="agent_ref",
        description="`name` (newest version at each turn) or `name@N`.",
    )
    user_id: str
    metadata: dict[str, Any]
    file_ids: list[UUID] = Field(
        description="The files its next turn may read: those it started with and those its "
        "turns were given (a deleted file drops out at the next turn)."
    )
    # Its own name first: a detail's `turns` are the turns themselves.
    turn_count: int = Field(validation_alias=AliasChoices("turn_count", "turns"))
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: ConversationRecord) -> "ConversationOut":
        return cls.model_validate(record)


class TurnOut(BaseModel):
    """One turn: the task that ran it, what was asked and what it answered."""

    turn: int
    task_id: UUID
    status: TaskState
    agent_version: int | None
    input: str | None = None
    messages: list[dict[str, Any]] | None = None
    answer: str | None = Field(
        description="The agent's answer (the stream's `done` event and webhooks call it "
        "`answer` too); null until the task ends with one."
    )
    result: str | None = Field(
        deprecated="`result` is the old name of `answer`, kept for one release.",
        description="Deprecated: the same as `answer`, under its old name.",
    )
    output: Any = None
    error_code: ErrorCode | None
    usage: ChainMetrics
    created_at: datetime
    finished_at: datetime | None
    stream_url: str

    @classmethod
    def of(cls, task: TaskRecord) -> "TurnOut":
        request = task.request
        return cls(
            turn=task.turn or 0,
            task_id=task.id,
            status=task.status,
            agent_version=task.agent_version,
            input=request.get("input"),
            messages=request.get("messages"),
            answer=task.final_answer,
            result=task.final_answer,
            output=task.output,
            error_code=task.error_code,
            usage=task.usage,
            created_at=task.created_at,
            finished_at=task.finished_at,
            stream_url=stream_url(task.id),
        )


class ConversationDetail(ConversationOut):
    """A conversation with its turns, in order, and their totals."""

    turns: list[TurnOut] = Field(description="The turns, in order.")
    totals: Totals

    @classmethod
    def with_turns(
        cls, record: ConversationRecord, turns: list[TaskRecord]
    ) -> "ConversationDetail":
        usages = [task.usage for task in turns]
        totals = Totals(
            turns=len(turns),
            llm_calls=sum(u.llm_calls for u in usages),
            tool_calls=sum(u.tool_calls for u in usages),
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            total_tokens=sum(u.total_tokens for u in usages),
            total_cost_usd=sum((u.total_cost_usd for u in usages), Decimal(0)),
            unpriced_calls=sum(u.unpriced_calls for u in usages),
        )
        base = ConversationOut.of(record).model_dump()
        return cls(**base, turns=[TurnOut.of(task) for task in turns], totals=totals)


class ConversationPage(BaseModel):
    items: list[ConversationOut]
    next_cursor: str | None
