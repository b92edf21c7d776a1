"""Tool calls that wait for a human: read within one tenant. Their writes (a run asking,
a decision, a timeout) change the task too and go through `app.storage.runs.approvals`."""

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Select, select

from app.storage.pagination import Cursor, Page
from app.storage.repository import TenantScoped
from app.storage.tables import approvals

PENDING = "pending"


class ApprovalRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    task_id: UUID
    chain_id: UUID
    step_id: UUID
    tool_name: str
    tool_type: str
    visibility: str
    arguments: dict[str, Any]
    input_schema: dict[str, Any]
    held_step_ids: list[str]
    note: str | None
    submitter_decides: bool
    status: str
    decided_by: str | None
    reason: str | None
    decided_arguments: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    consumed_at: datetime | None


class ApprovalRepository(TenantScoped):
    def select(self) -> Select[Any]:
        return select(approvals).where(approvals.c.tenant_id == self.tenant_id)

    async def get(self, task_id: UUID, approval_id: UUID) -> ApprovalRecord | None:
        statement = self.select().where(
            approvals.c.task_id == task_id, approvals.c.id == approval_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else ApprovalRecord.model_validate(row._mapping)

    async def of_task(self, task_id: UUID) -> list[ApprovalRecord]:
        """A task's approvals, oldest first."""
        statement = (
            self.select()
            .where(approvals.c.task_id == task_id)
            .order_by(approvals.c.created_at, approvals.c.id)
        )
        rows = (await self.connection.execute(statement)).all()
        return [ApprovalRecord.model_validate(row._mapping) for row in rows]

    async def page(
        self, *, status: str | None, cursor: Cursor | None, limit: int
    ) -> Page[ApprovalRecord]:
        """The tenant's approvals, newest first."""
        statement = self.select()
        if status is not None:
            statement = statement.where(approvals.c.status == status)
        if cursor is not None:
            statement = statement.where(cursor.before(approvals.c.created_at, approvals.c.id))
        statement = statement.order_by(approvals.c.created_at.desc(), approvals.c.id.desc())
        rows = (await self.connection.execute(statement.limit(limit + 1))).all()
        fetched = [ApprovalRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda approval: Cursor(approval.created_at, approval.id))
