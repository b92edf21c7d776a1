"""Reading and deciding the tool calls that wait for a human."""

from typing import Any
from uuid import UUID

from app.api.approvals.schemas import ApprovalDecision, ApprovalOut
from app.api.errors import APPROVAL_DECIDED, VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.api.tasks.service import find_task
from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.governance.callers import Caller
from app.runs.errors import Forbidden, NotFound, TaskAlreadyFinished
from app.runs.recorder import progress_facts
from app.security.rbac import Permission
from app.security.visibility import ReaderView
from app.storage.approvals import ApprovalRecord, ApprovalRepository
from app.tools.approvals import ApprovalStatus
from app.tools.patterns import PatternTimeout, pattern_budget
from app.tools.schemas import unchecked_validator


def approval_out(view: ReaderView, record: ApprovalRecord) -> ApprovalOut:
    """An approval as this reader may see its call: arguments only where the call's step
    shows them in full, redacted as its steps are."""
    facts = progress_facts(record.tool_type, record.tool_name, record.visibility)
    return ApprovalOut.of(
        record,
        view.arguments(record.arguments, facts),
        None
        if record.decided_arguments is None
        else view.arguments(record.decided_arguments, facts),
    )


async def task_approvals(state: AppState, caller: Caller, task_id: UUID) -> list[ApprovalOut]:
    await find_task(state, caller, task_id)
    async with state.database.read() as connection:
        records = await ApprovalRepository(connection, caller.tenant_id).of_task(task_id)
    view = caller.view(state.runs.tool_sensitive_fields)
    return [approval_out(view, record) for record in records]


async def decide(
    state: AppState, caller: Caller, task_id: UUID, approval_id: UUID, body: ApprovalDecision
) -> ApprovalOut:
    """Stores a reviewer's decision; the last pending one of a suspended run puts its task
    back in the queue, for any instance to resume. Tenant admins decide (`task:approve`);
    so does the task's submitter where its agent allows it."""
    task = await find_task(state, caller, task_id)
    async with state.database.read() as connection:
        record = await ApprovalRepository(connection, caller.tenant_id).get(task_id, approval_id)
    if record is None:
        raise NotFound("approval", approval_id)
    may = Permission.TASK_APPROVE in caller.permissions or (
        record.submitter_decides and task.user_id == caller.subject
    )
    if not may:
        raise Forbidden(
            "deciding on a task's tool calls takes `task:approve` (tenant admins; a task's "
            "submitter too where its agent allows it)",
            permission=Permission.TASK_APPROVE,
        )
    if record.status != ApprovalStatus.PENDING:
        raise _decided(record)
    if task.is_finished:
        raise TaskAlreadyFinished(task.id, task.status)
    approve = body.decision == "approve"
    arguments = body.arguments if approve else None
    if arguments is not None:
        # Off the event loop, in one of the tenant's worker threads: the tool's schema may
        # have patterns (matched within a budget).
        threads = state.runtime.executor.threads
        problems = await threads.run(caller.tenant_id, _invalid, record.input_schema, arguments)
        if problems:
            raise ApiError(
                VALIDATION, "the edited arguments do not fit the tool's schema", errors=problems
            )
    status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    now = utc_now()
    audit = audit_row(
        actor=caller.subject,
        action=AuditAction.APPROVAL_DECIDE,
        resource_type="approval",
        resource_id=str(approval_id),
        details={
            "task_id": str(task_id),
            "step_id": str(record.step_id),
            "tool": record.tool_name,
            "decision": status.value,
            "arguments_edited": arguments is not None,
            "reason": body.reason,
        },
        at=now,
    )
    decided = await state.run_stores.approvals.decide(
        caller.tenant_id,
        task_id,
        approval_id,
        status=status,
        by=caller.subject,
        reason=body.reason,
        arguments=arguments,
        at=now,
        audit={**audit, "tenant_id": caller.tenant_id},
    )
    if decided is None:  # decided (or timed out) meanwhile
        async with state.database.read() as connection:
            current = await ApprovalRepository(connection, caller.tenant_id).get(
                task_id, approval_id
            )
        raise _decided(current or record)
    return approval_out(caller.view(state.runs.tool_sensitive_fields), decided)


def _decided(record: ApprovalRecord) -> ApiError:
    by = f" by {record.decided_by}" if record.decided_by else ""
    return ApiError(
        APPROVAL_DECIDED,
        f"approval {record.id} was already decided: {record.status}{by}",
    )


def _invalid(schema: dict[str, Any], arguments: dict[str, Any]) -> list[FieldProblem]:
    validator = unchecked_validator(schema)
    try:
        with pattern_budget():
            errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except PatternTimeout as exc:
        return [FieldProblem(field="body.arguments", message=f"cannot be checked: {exc}")]
    problems = []
    for error in errors:
        path = ".".join(str(part) for part in error.path)
        field = "body.arguments" + (f".{path}" if path else "")
        problems.append(FieldProblem(field=field, message=error.message[:500]))
    return problems[:20]
