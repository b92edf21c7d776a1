"""Schedules as clients make and read them."""

from datetime import datetime
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from app.resources.agents import DEFAULT_AGENT
from app.resources.schedules import (
    InvalidCron,
    NewSchedule,
    ScheduleChanges,
    ScheduleRecord,
    TaskDocument,
    check_cron,
    zone,
)
from app.runs import TaskSubmission
from app.storage.pagination import Page


def _cron(expression: str) -> str:
    try:
        return check_cron(expression)
    except InvalidCron as exc:
        raise ValueError(str(exc)) from None


def _zone(name: str) -> str:
    try:
        zone(name)
    except InvalidCron as exc:
        raise ValueError(str(exc)) from None
    return name


Cron = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        description="Five fields, minute hour day-of-month month day-of-week (`*/15 * * * *`, "
        "`0 9 * * 1-5`), or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`; read in "
        "`timezone`. At most once a minute.",
    ),
    AfterValidator(_cron),
]
TimeZone = Annotated[
    str,
    Field(min_length=1, max_length=64, description="An IANA time zone, e.g. `Europe/Berlin`."),
    AfterValidator(_zone),
]
ScheduleName = Annotated[str, Field(min_length=1, max_length=200)]


class ScheduledTask(TaskSubmission):
    """The task each firing submits, as `POST /api/v1/tasks` takes it (its `agent` names the
    tenant's agent, `name` or `name@N`). Not a conversation's turn, and not streamed."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"input": "Summarise today's issues."}]}
    )

    @model_validator(mode="after")
    def _standalone(self) -> Self:
        if self.conversation_id is not None:
            raise ValueError("a schedule's task cannot be a conversation's turn")
        if self.stream_output:
            raise ValueError("a schedule's task has no client to stream to")
        return self


class ScheduleCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "Morning digest",
                    "cron": "0 8 * * 1-5",
                    "timezone": "Europe/Berlin",
                    "task": {"agent": "digest", "input": "Summarise yesterday's issues."},
                }
            ]
        },
    )

    name: ScheduleName
    cron: Cron
    timezone: TimeZone = "UTC"
    task: ScheduledTask

    def schedule(self) -> NewSchedule:
        return NewSchedule(self.name, self.cron, self.timezone, task_document(self.task))


class ScheduleUpdate(BaseModel):
    """The fields to change; the rest stay."""

    model_config = ConfigDict(extra="forbid")

    name: ScheduleName | None = None
    cron: Cron | None = None
    timezone: TimeZone | None = None
    task: ScheduledTask | None = None

    def changes(self) -> ScheduleChanges:
        task = None if self.task is None else task_document(self.task)
        return ScheduleChanges(self.name, self.cron, self.timezone, task)


class ScheduleOut(BaseModel):
    id: UUID
    name: str
    agent: str = Field(description="The agent each firing runs (`name` or `name@N`).")
    task: dict[str, Any] = Field(
        validation_alias="request", description="The task each firing submits."
    )
    cron: str
    timezone: str
    status: Literal["active", "paused"]
    next_fire_at: datetime | None = Field(description="When it fires next (null while paused).")
    runs_as: str = Field(
        validation_alias="created_by",
        description="Whose task each firing is: its creator, with the roles (and API key) it "
        "had when it made the schedule.",
    )
    fired_count: int = Field(description="Firings that made a task.")
    skipped_count: int = Field(
        description="Firings skipped because the task of an earlier one was still running."
    )
    last_fired_at: datetime | None
    last_task_id: UUID | None
    last_skipped_at: datetime | None
    last_error: str | None = Field(description="Why its last firing made no task, if it did not.")
    last_error_at: datetime | None
    created_at: datetime
    updated_at: datetime
    tasks_url: str = Field(description="The tasks its firings made.")

    @classmethod
    def of(cls, record: ScheduleRecord) -> "ScheduleOut":
        return cls.model_validate(
            {
                **record.model_dump(),
                "agent": record.agent or DEFAULT_AGENT,
                "tasks_url": f"/api/v1/schedules/{record.id}/tasks",
            }
        )


class SchedulePage(BaseModel):
    items: list[ScheduleOut]
    next_cursor: str | None

    @classmethod
    def of(cls, page: Page[ScheduleRecord]) -> "SchedulePage":
        return cls(
            items=[ScheduleOut.of(record) for record in page.items], next_cursor=page.next_cursor
        )


def task_document(task: ScheduledTask) -> TaskDocument:
    """A scheduled task as stored: its agent apart, the rest as its submission's JSON."""
    document = task.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    agent = document.pop("agent", None)
    return TaskDocument(agent, document)
