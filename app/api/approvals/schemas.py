"""What the approval routes take and answer."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.runs.approval_inbox import ShownApproval
from app.tools.approvals import ApprovalStatus


class ApprovalOut(BaseModel):
    """A tool call that waits (or waited) for a human's decision."""

    id: UUID
    task_id: UUID
    chain_id: UUID
    step_id: UUID = Field(description="The call's `tool_call` step.")
    tool: str = Field(validation_alias="tool_name")
    tool_type: str
    arguments: dict[str, Any] | None = Field(
        description="The arguments the model gave, as the reader may see them (sensitive "
        "fields redacted); null when the call is hidden or only summarised for the reader."
    )
    input_schema: dict[str, Any] = Field(description="The JSON Schema of the tool's arguments.")
    note: str | None = Field(
        description="Why it is asked beyond the policy, e.g. a call whose outcome is unknown."
    )
    status: ApprovalStatus
    decided_by: str | None = Field(description="Who decided; null while pending or on timeout.")
    reason: str | None
    decided_arguments: dict[str, Any] | None = Field(
        description="The arguments the reviewer edited, as the reader may see them; null: the "
        "call ran (or would have run) with the model's."
    )
    created_at: datetime
    expires_at: datetime = Field(description="When it is denied on its own if still pending.")
    decided_at: datetime | None

    @classmethod
    def of(cls, shown: ShownApproval) -> "ApprovalOut":
        # The arguments as the reader may see them, never the record's own.
        record = shown.record.model_dump(exclude={"arguments", "decided_arguments"})
        return cls.model_validate(
            {**record, "arguments": shown.arguments, "decided_arguments": shown.decided_arguments}
        )


class ApprovalList(BaseModel):
    task_id: UUID
    items: list[ApprovalOut]


class ApprovalPage(BaseModel):
    items: list[ApprovalOut]
    next_cursor: str | None


class ApprovalDecision(BaseModel):
    """A reviewer's decision on one call."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="With `approve`: the arguments to run the call with instead of the "
        "model's, validated against the tool's schema.",
    )
    reason: str | None = Field(
        default=None,
        max_length=2_000,
        description="Why; a denial's reason is what the model reads.",
    )
