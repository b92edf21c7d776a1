"""Tool calls that wait for a human: the tenant's inbox, a task's approvals, a decision."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from app.api.access import RequireTaskRead
from app.api.approvals.schemas import ApprovalDecision, ApprovalList, ApprovalOut, ApprovalPage
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.services import Inbox
from app.storage.pagination import MAX_PAGE_SIZE
from app.tools.approvals import ApprovalStatus

router = APIRouter(prefix="/api/v1", tags=["approvals"], route_class=CheckedRoute)


@router.get("/approvals", summary="The tenant's approvals", responses=problems(401, 403, 422))
async def list_approvals(
    caller: RequireTaskRead,
    inbox: Inbox,
    status: ApprovalStatus | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ApprovalPage:
    """Tool calls of the tenant's tasks that wait (`status=pending`) or waited for a human,
    newest first: the reviewers' inbox. Arguments as the caller may see each call."""
    page = await inbox.page(caller, status=status, cursor=cursor, limit=limit)
    return ApprovalPage(
        items=[ApprovalOut.of(shown) for shown in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/tasks/{task_id}/approvals",
    summary="A task's approvals",
    responses=problems(401, 403, 404, 422),
)
async def get_task_approvals(
    task_id: UUID, caller: RequireTaskRead, state: State, inbox: Inbox
) -> ApprovalList:
    """The task's tool calls that wait or waited for a human, oldest first."""
    task = await state.tasks.find(caller, task_id)
    shown = await inbox.of_task(caller, task)
    return ApprovalList(task_id=task_id, items=[ApprovalOut.of(each) for each in shown])


@router.post(
    "/tasks/{task_id}/approvals/{approval_id}",
    summary="Approve or deny a tool call",
    responses=problems(401, 403, 404, 409, 422),
)
async def post_decision(
    task_id: UUID,
    approval_id: UUID,
    body: ApprovalDecision,
    caller: RequireTaskRead,
    state: State,
    inbox: Inbox,
) -> ApprovalOut:
    """`approve` runs the call (with `arguments` instead of the model's, if given, validated
    against the tool's schema); `deny` tells the model it was denied, with `reason`. Once a
    suspended run's last pending call is decided, any instance resumes it. Takes
    `task:approve` (tenant admins; the task's submitter where its agent allows it); a call
    decided already, or by its timeout, answers 409 `approval-decided`. Audited."""
    task = await state.tasks.find(caller, task_id)
    decided = await inbox.decide(
        caller,
        task,
        approval_id,
        decision=body.decision,
        arguments=body.arguments,
        reason=body.reason,
    )
    return ApprovalOut.of(decided)
