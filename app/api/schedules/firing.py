"""A schedule's firing: its task, submitted through the same path as a caller's (quotas,
budgets, model policy and tool permissions apply), as the schedule's creator.

A schedule runs as the user who made it, with the roles (and the API key) it had then, as a
queued task runs as its submitter: its tasks count against that user's and key's limits and
are theirs to read and cancel. A revoked or expired key, or a suspended tenant, stops its
firings (each then records why)."""

from datetime import datetime
from uuid import UUID

from app.api.state import AppState
from app.api.tasks.service import submit_task
from app.chain.models import utc_now
from app.governance.callers import Caller
from app.governance.quotas import RateLimited
from app.resources.scheduler import FiringRefused
from app.runs import TaskSubmission
from app.runs.agents import AgentArchived, UnknownAgent
from app.runs.errors import Forbidden, InvalidSubmission, NotFound
from app.security import Principal
from app.security.rbac import permissions_of
from app.storage.api_keys import key_by_id
from app.storage.runs import ConversationBusy
from app.storage.schedules import ScheduleRecord

# What a submission may be refused with: recorded on the schedule, not logged as a failure.
_REFUSALS = (
    RateLimited,
    InvalidSubmission,
    UnknownAgent,
    AgentArchived,
    NotFound,
    Forbidden,
    ConversationBusy,
)


def submission_of(schedule: ScheduleRecord) -> TaskSubmission:
    extra = {} if schedule.agent is None else {"agent": schedule.agent}
    return TaskSubmission.model_validate({**schedule.request, **extra})


async def runs_as(state: AppState, schedule: ScheduleRecord) -> Caller:
    """The caller a schedule's tasks are submitted as (`FiringRefused` when it can no longer
    act)."""
    tenant = await state.tenants.get(schedule.tenant_id)
    if tenant is None or not tenant.is_active:
        raise FiringRefused(f"tenant {schedule.tenant_id} is suspended or gone")
    key = None
    if schedule.api_key_id is not None:
        async with state.database.read() as connection:
            record = await key_by_id(connection, schedule.api_key_id)
        now = utc_now()
        if record is None or record.revoked_at is not None:
            raise FiringRefused("the API key the schedule was made with is revoked")
        if record.expires_at is not None and record.expires_at <= now:
            raise FiringRefused("the API key the schedule was made with has expired")
        key = await state.api_keys.grant(schedule.api_key_id)
    roles = frozenset(schedule.roles)
    principal = Principal(
        subject=schedule.created_by,
        tenant_id=schedule.tenant_id,
        roles=roles,
        api_key=None if schedule.api_key_id is None else str(schedule.api_key_id),
    )
    return Caller(principal, tenant, permissions_of(roles), key)


async def fire_schedule(state: AppState, schedule: ScheduleRecord, fire_at: datetime) -> UUID:
    """Submits the schedule's task for its firing at `fire_at`; returns the task's id."""
    caller = await runs_as(state, schedule)
    try:
        submitted = await submit_task(
            state, caller, submission_of(schedule), schedule_id=schedule.id
        )
    except _REFUSALS as exc:
        raise FiringRefused(f"{type(exc).__name__}: {exc}") from exc
    return submitted.task_id
