"""Tool calls that wait for a human, as reviewers meet them: the tenant's inbox, a task's
approvals, and a decision, which puts a suspended run's task back in the queue once its last
pending call is decided."""

from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from app.bulkheads import TenantThreads
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.governance.audit import AuditAction, audit_row
from app.governance.callers import Caller
from app.runs.errors import Forbidden, NotFound, TaskAlreadyFinished
from app.runs.manager import RunManager
from app.runs.recorder import progress_facts
from app.security.rbac import Permission
from app.security.visibility import ReaderView
from app.storage.approvals import ApprovalRecord, ApprovalRepository
from app.storage.database import Database
from app.storage.pagination import Cursor, Page
from app.storage.records import TaskRecord
from app.storage.runs.approvals import ApprovalWrites
from app.tools.approvals import ApprovalStatus
from app.tools.errors import FieldError
from app.tools.patterns import PatternTimeout, pattern_budget
from app.tools.schemas import unchecked_validator


class ApprovalDecided(OmniForgeError):
    """The call was decided already: by a reviewer, or denied by its timeout."""

    def __init__(self, record: ApprovalRecord) -> None:
        by = f" by {record.decided_by}" if record.decided_by else ""
        super().__init__(f"approval {record.id} was already decided: {record.status}{by}")
        self.approval_id = record.id


class EditedArgumentsInvalid(OmniForgeError):
    """A reviewer's edited arguments do not fit the tool's schema; `problems` says where
    (`arguments.…`)."""

    def __init__(self, problems: list[FieldError]) -> None:
        super().__init__("the edited arguments do not fit the tool's schema")
        self.problems = problems


@dataclass(frozen=True, slots=True)
class ShownApproval:
    """An approval as one reader may see its call: the arguments (the model's, and the
    reviewer's edit) only where the call's step shows them in full, redacted as its steps are;
    None otherwise."""

    record: ApprovalRecord
    arguments: dict[str, Any] | None
    decided_arguments: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ApprovalInbox:
    """A tenant's approvals, read through `database` and decided through `approvals`, each
    shown as the reader may see its call (the tools' sensitive fields known to `runs`). Edited
    arguments are checked against the tool's schema in the tenant's worker `threads`."""

    database: Database
    runs: RunManager
    approvals: ApprovalWrites
    threads: TenantThreads

    async def page(
        self, caller: Caller, *, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> Page[ShownApproval]:
        """The tenant's approvals (those with `status`, if given), newest first."""
        async with self.database.read() as connection:
            page = await ApprovalRepository(connection, caller.tenant_id).page(
                status=status, cursor=Cursor.decode(cursor) if cursor else None, limit=limit
            )
        view = self._view(caller)
        return Page([_shown(view, record) for record in page.items], page.next_cursor)

    async def of_task(self, caller: Caller, task: TaskRecord) -> list[ShownApproval]:
        """The task's approvals, oldest first."""
        async with self.database.read() as connection:
            records = await ApprovalRepository(connection, caller.tenant_id).of_task(task.id)
        view = self._view(caller)
        return [_shown(view, record) for record in records]

    async def decide(
        self,
        caller: Caller,
        task: TaskRecord,
        approval_id: UUID,
        *,
        decision: Literal["approve", "deny"],
        arguments: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> ShownApproval:
        """Stores a reviewer's decision (`arguments`, with `approve`: what to run the call
        with instead of the model's); the last pending one of a suspended run puts its task
        back in the queue, for any instance to resume. Tenant admins decide
        (`task:approve`); so does the task's submitter where its agent allows it. Audited."""
        task_id = task.id
        async with self.database.read() as connection:
            record = await ApprovalRepository(connection, caller.tenant_id).get(
                task_id, approval_id
            )
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
            raise ApprovalDecided(record)
        if task.is_finished:
            raise TaskAlreadyFinished(task.id, task.status)
        approve = decision == "approve"
        edited = arguments if approve else None
        if edited is not None:
            # Off the event loop, in one of the tenant's worker threads: the tool's schema may
            # have patterns (matched within a budget).
            problems = await self.threads.run(
                caller.tenant_id, _invalid, record.input_schema, edited
            )
            if problems:
                raise EditedArgumentsInvalid(problems)
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
                "arguments_edited": edited is not None,
                "reason": reason,
            },
            at=now,
        )
        decided = await self.approvals.decide(
            caller.tenant_id,
            task_id,
            approval_id,
            status=status,
            by=caller.subject,
            reason=reason,
            arguments=edited,
            at=now,
            audit={**audit, "tenant_id": caller.tenant_id},
        )
        if decided is None:  # decided (or timed out) meanwhile
            async with self.database.read() as connection:
                current = await ApprovalRepository(connection, caller.tenant_id).get(
                    task_id, approval_id
                )
            raise ApprovalDecided(current or record)
        return _shown(self._view(caller), decided)

    def _view(self, caller: Caller) -> ReaderView:
        return caller.view(self.runs.tool_sensitive_fields)


def _shown(view: ReaderView, record: ApprovalRecord) -> ShownApproval:
    facts = progress_facts(record.tool_type, record.tool_name, record.visibility)
    return ShownApproval(
        record,
        view.arguments(record.arguments, facts),
        None
        if record.decided_arguments is None
        else view.arguments(record.decided_arguments, facts),
    )


def _invalid(schema: dict[str, Any], arguments: dict[str, Any]) -> list[FieldError]:
    validator = unchecked_validator(schema)
    try:
        with pattern_budget():
            errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except PatternTimeout as exc:
        return [FieldError("arguments", f"cannot be checked: {exc}")]
    problems = []
    for error in errors:
        path = ".".join(str(part) for part in error.path)
        field = "arguments" + (f".{path}" if path else "")
        problems.append(FieldError(field, error.message[:500]))
    return problems[:20]
