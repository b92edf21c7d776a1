"""Chain resources. Steps are stored as JSON and served without a decode/encode round trip,
so the chain and step routes splice stored step documents into the rendered envelope."""

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, Field

from app.chain import ChainMetrics, ChainStatus, ErrorCode, ReasoningStep
from app.runs.chains import ChainRead, StepsRead
from app.security.visibility import StepSummary
from app.storage.records import ChainRecord


class ChainSummary(BaseModel):
    id: UUID
    task_id: UUID
    agent_id: str
    parent_chain_id: UUID | None
    replayed_from: UUID | None = Field(
        default=None, description="The chain a replay took every step from."
    )
    forked_from: UUID | None = Field(
        default=None, description="The chain a fork took its first steps from."
    )
    status: ChainStatus
    metrics: ChainMetrics
    error_code: ErrorCode | None
    error_message: str | None
    started_at: datetime
    completed_at: datetime | None

    @classmethod
    def of(cls, chain: ChainRecord) -> "ChainSummary":
        return cls.model_validate(chain, from_attributes=True)


class ChainOut(ChainSummary):
    """A chain with its steps in order (readable while it runs), as the reader may see them:
    whole, or (`summary` visibility, without `chain:read_full`) as a summary; and the chains
    of the sub-agents' tasks its calls started."""

    child_chain_ids: list[UUID] = Field(
        default_factory=list,
        description="The chains of the sub-agents' tasks this chain's calls started (each "
        "names this one as its `parent_chain_id`), oldest first.",
    )
    steps: list[ReasoningStep | StepSummary]


class ChainDocument(ChainSummary):
    """A chain's envelope as served with its stored steps spliced in (`chain_json`)."""

    child_chain_ids: list[UUID]


class StepPage(BaseModel):
    items: list[ReasoningStep | StepSummary]
    next_after: int | None


class ChainPage(BaseModel):
    items: list[ChainSummary]
    next_cursor: str | None


def chain_json(read: ChainRead) -> bytes:
    """A chain as `ChainOut` in JSON, its step documents spliced in."""
    summary = ChainSummary.of(read.chain).model_dump()
    head = ChainDocument(**summary, child_chain_ids=read.child_ids).model_dump_json()
    return f'{head[:-1]},"steps":[{",".join(read.steps)}]}}'.encode()


def steps_json(read: StepsRead) -> bytes:
    """A page of steps as `StepPage` in JSON, its step documents spliced in."""
    next_after = "null" if read.next_after is None else read.next_after
    return f'{{"items":[{",".join(read.steps)}],"next_after":{next_after}}}'.encode()
