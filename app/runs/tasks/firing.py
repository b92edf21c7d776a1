"""A schedule's task as a submission: checked when the schedule is made or its task changed,
and submitted at each firing through the same path as a caller's (quotas, budgets, model
policy and tool permissions apply), as whom the schedule runs as (`runs_as`)."""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from app.governance.callers import Caller
from app.governance.quotas import RateLimited
from app.resources.agents import AgentArchived
from app.resources.schedules import FiringRefused, ScheduleRecord, TaskDocument, runs_as
from app.runs.agents import UnknownAgent, resolve_agent
from app.runs.errors import Forbidden, InvalidSubmission, NotFound
from app.runs.models import TaskSubmission
from app.runs.tasks.service import TaskService
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


@dataclass(frozen=True, slots=True)
class ScheduleFirings:
    """Schedules' tasks, submitted through `tasks`."""

    tasks: TaskService

    async def check(self, caller: Caller, task: TaskDocument) -> None:
        """Refuses the task as its submission by `caller` would be (agent, model, tools)."""
        async with self.tasks.database.read() as connection:
            resolved = await resolve_agent(connection, caller.tenant_id, task.agent)
        policy = await self.tasks.inputs.caller_policy(caller)
        self.tasks.runs.validate(submission_of(task), policy, resolved)

    async def fire(self, schedule: ScheduleRecord, fire_at: datetime) -> UUID:
        """Submits the schedule's task for its firing at `fire_at`; returns the task's id."""
        inputs = self.tasks.inputs
        caller = await runs_as(
            schedule, database=inputs.database, tenants=inputs.tenants, api_keys=inputs.api_keys
        )
        task = TaskDocument(schedule.agent, schedule.request)
        try:
            submitted = await self.tasks.submit(
                caller, submission_of(task), schedule_id=schedule.id
            )
        except _REFUSALS as exc:
            raise FiringRefused(f"{type(exc).__name__}: {exc}") from exc
        return submitted.task_id
