"""A schedule's task as a submission: checked when the schedule is made or its task changed,
and submitted at each firing through the same path as a caller's (quotas, budgets, model
policy and tool permissions apply), as whom the schedule runs as (`runs_as`)."""

from datetime import datetime
from uuid import UUID

from app.api.state import AppState
from app.api.tasks.service import run_policy, submit_task
from app.governance.callers import Caller
from app.governance.quotas import RateLimited
from app.resources.schedules import FiringRefused, ScheduleRecord, TaskDocument, runs_as
from app.runs import TaskSubmission
from app.runs.agents import AgentArchived, UnknownAgent, resolve_agent
from app.runs.errors import Forbidden, InvalidSubmission, NotFound
from app.storage.runs import ConversationBusy

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


def submission_of(task: TaskDocument) -> TaskSubmission:
    extra = {} if task.agent is None else {"agent": task.agent}
    return TaskSubmission.model_validate({**task.request, **extra})


async def check_task(state: AppState, caller: Caller, task: TaskDocument) -> None:
    """Refuses the task as its submission by `caller` would be (agent, model, tools)."""
    async with state.database.read() as connection:
        resolved = await resolve_agent(connection, caller.tenant_id, task.agent)
    state.runs.validate(submission_of(task), await run_policy(state, caller), resolved)


async def fire_schedule(state: AppState, schedule: ScheduleRecord, fire_at: datetime) -> UUID:
    """Submits the schedule's task for its firing at `fire_at`; returns the task's id."""
    caller = await runs_as(
        schedule, database=state.database, tenants=state.tenants, api_keys=state.api_keys
    )
    task = TaskDocument(schedule.agent, schedule.request)
    try:
        submitted = await submit_task(state, caller, submission_of(task), schedule_id=schedule.id)
    except _REFUSALS as exc:
        raise FiringRefused(f"{type(exc).__name__}: {exc}") from exc
    return submitted.task_id
