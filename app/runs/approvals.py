"""Approvals between a run and the store: which of a run's calls wait for a human, the rows
of calls that begin to wait, the decisions (and their events) a resumed run applies, and the
timeouts that deny calls nobody decided on."""

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from app.chain import ApprovalDecidedEvent, ToolType, VisibilityLevel
from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.runs.agents import ResolvedAgent
from app.runs.models import RunPolicy
from app.storage.approvals import PENDING, ApprovalRecord
from app.storage.records import TaskRecord
from app.storage.runs import ApprovalWrites, Fence
from app.tools.approvals import (
    ApprovalGate,
    ApprovalStatus,
    Decision,
    PendingApproval,
    exfiltration_of,
    timeout_of,
)
from app.tools.dataflow import DataFlow, ExfiltrationMode

logger = logging.getLogger(__name__)


def approval_gate(
    store: ApprovalWrites,
    task: TaskRecord,
    fence: Fence,
    agent: ResolvedAgent,
    policy: RunPolicy,
    decisions: Sequence[ApprovalRecord],
    *,
    default_timeout_s: float,
) -> ApprovalGate:
    """Which of the run's calls wait for a human (the tenant's and the agent's rules, each
    tool's own, and calls that could send data out once the run holds untrusted and private
    data), and what was decided for those of its last suspension."""
    own = agent.definition.approvals
    rules = [r for r in (own, policy.approvals) if r is not None]
    submitter_decides = own is not None and own.submitter_decides

    async def ask(pending: Sequence[PendingApproval], held: Sequence[UUID]) -> None:
        now = utc_now()
        rows = [
            approval_row(task, call, held, submitter_decides=submitter_decides, at=now)
            for call in pending
        ]
        await store.ask(task.id, fence, rows)

    async def consume(approval_ids: Sequence[UUID]) -> None:
        await store.consume(approval_ids, utc_now())

    return ApprovalGate(
        rules=rules,
        decisions={record.step_id: decision_of(record) for record in decisions},
        held=frozenset(UUID(h) for record in decisions for h in record.held_step_ids),
        ask=ask,
        consume=consume,
        timeout_s=timeout_of(rules, default_timeout_s),
        flow=DataFlow(asks=exfiltration_of(rules) is ExfiltrationMode.APPROVE),
    )


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


class ApprovalTimeouts:
    """Denies the calls nobody decided on in time: sleeps until the next one's timeout, or
    until calls began to wait anywhere (`asked`, on a notice); any instance may deny a call,
    once."""

    def __init__(self, store: ApprovalWrites, *, retry_s: float) -> None:
        self._store = store
        self._retry_s = retry_s
        self._asked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def asked(self) -> None:
        """Calls began to wait somewhere: their timeouts are read again."""
        self._asked.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._expire_due(), name="approval-timeouts")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])

    async def _expire_due(self) -> None:
        while True:
            self._asked.clear()
            try:
                next_at = await self._store.next_expiry()
                wait_s = None if next_at is None else (next_at - utc_now()).total_seconds()
                if wait_s is None or wait_s > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait_s):
                            await self._asked.wait()
                    continue
                for tenant_id, task_id, approval_id, timeout_s in await self._store.due(utc_now()):
                    await self._expire(tenant_id, task_id, approval_id, timeout_s)
            except Exception:
                logger.warning("denying timed-out approvals failed; retrying", exc_info=True)
                await asyncio.sleep(self._retry_s)

    async def _expire(
        self, tenant_id: str, task_id: UUID, approval_id: UUID, timeout_s: int
    ) -> None:
        now = utc_now()
        audit = audit_row(
            actor="system",
            action=AuditAction.APPROVAL_EXPIRE,
            resource_type="approval",
            resource_id=str(approval_id),
            details={"task_id": str(task_id), "timeout_s": timeout_s},
            at=now,
        )
        await self._store.decide(
            tenant_id,
            task_id,
            approval_id,
            status=ApprovalStatus.EXPIRED,
            by=None,
            reason=f"no decision within {timeout_s} s",
            arguments=None,
            at=now,
            audit={**audit, "tenant_id": tenant_id},
        )
