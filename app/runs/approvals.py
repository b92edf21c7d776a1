"""Approvals between a run and the store: the rows of calls that begin to wait, and the
decisions (and their events) a resumed run applies."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from app.chain import ApprovalDecidedEvent, ToolType, VisibilityLevel
from app.storage.approvals import PENDING, ApprovalRecord
from app.storage.records import TaskRecord
from app.tools.approvals import ApprovalStatus, Decision, PendingApproval


def approval_row(
    task: TaskRecord,
    call: PendingApproval,
    held: Sequence[UUID],
    *,
    submitter_decides: bool,
    at: datetime,
) -> dict[str, Any]:
    step = call.call_step
    return {
        "id": call.approval_id,
        "tenant_id": task.tenant_id,
        "task_id": task.id,
        "chain_id": task.chain_id,
        "step_id": step.id,
        "tool_name": call.tool_name,
        "tool_type": call.tool_type.value,
        "visibility": step.visibility.level.value,
        "arguments": call.arguments,
        "input_schema": call.input_schema,
        "held_step_ids": [str(step_id) for step_id in held],
        "note": call.note,
        "submitter_decides": submitter_decides,
        "status": PENDING,
        "created_at": at,
        "expires_at": call.expires_at,
    }


def decision_of(record: ApprovalRecord) -> Decision:
    return Decision(
        approval_id=record.id,
        status=ApprovalStatus(record.status),
        decided_by=record.decided_by,
        reason=record.reason,
        arguments=record.decided_arguments,
    )


def decided_event(task: TaskRecord, record: ApprovalRecord) -> ApprovalDecidedEvent:
    """What the resumed run reports of a decision, before it acts on it."""
    return ApprovalDecidedEvent(
        task_id=str(task.id),
        chain_id=task.chain_id,
        approval_id=record.id,
        step_id=record.step_id,
        tool_name=record.tool_name,
        tool_type=ToolType(record.tool_type),
        visibility=VisibilityLevel(record.visibility),
        decision=ApprovalStatus(record.status).value,  # type: ignore[arg-type]
        decided_by=record.decided_by,
        reason=record.reason,
        arguments=record.decided_arguments,
    )
