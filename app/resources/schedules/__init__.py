"""A tenant's schedules: tasks submitted on a cron schedule, as their creator. The service
changes them on behalf of callers; the scheduler of every instance fires them when due."""

from app.resources.schedules.cron import InvalidCron, check_cron, zone
from app.resources.schedules.identity import runs_as
from app.resources.schedules.scheduler import Fire, FiringRefused, Scheduler
from app.resources.schedules.service import (
    NewSchedule,
    ScheduleChanges,
    ScheduleService,
    ScheduleUnresumable,
    TaskCheck,
    TaskDocument,
)
from app.resources.schedules.store import ScheduleRecord, ScheduleStore

__all__ = [
    "Fire",
    "FiringRefused",
    "InvalidCron",
    "NewSchedule",
    "ScheduleChanges",
    "ScheduleRecord",
    "ScheduleService",
    "ScheduleStore",
    "ScheduleUnresumable",
    "Scheduler",
    "TaskCheck",
    "TaskDocument",
    "check_cron",
    "runs_as",
    "zone",
]
