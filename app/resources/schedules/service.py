"""A tenant's schedules on behalf of a caller: each change stored with its audit row in one
transaction, then announced to every instance's scheduler."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.chain.models import utc_now
from app.errors import Forbidden, NotFound, OmniForgeError
from app.governance.api_keys import ApiKeys
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import TenantDirectory
from app.resources.schedules.cron import InvalidCron, next_fire
from app.resources.schedules.identity import runs_as
from app.resources.schedules.store import ScheduleRecord, ScheduleRepository
from app.security.rbac import Permission, cancels_any_task
from app.storage.database import Database
from app.storage.notify import SCHEDULES, Notices
from app.storage.pagination import Cursor, Page
from app.storage.records import TaskRecord
from app.storage.tasks import TaskRepository

_AUDITED = ("name", "agent", "request", "cron", "timezone", "status")


class ScheduleUnresumable(OmniForgeError):
    """A paused schedule whose cron names no further firing: it takes another cron first."""


@dataclass(frozen=True, slots=True)
class TaskDocument:
    """A schedule's task as stored: the agent it names apart, the rest as its submission's
    JSON."""

    agent: str | None
    request: dict[str, Any]


TaskCheck = Callable[[Caller, TaskDocument], Awaitable[None]]
"""Refuses a schedule's task as its submission by the caller would be refused (its agent,
model and tools)."""


@dataclass(frozen=True, slots=True)
class NewSchedule:
    name: str
    cron: str
    timezone: str
    task: TaskDocument


@dataclass(frozen=True, slots=True)
class ScheduleChanges:
    """The fields to change (None: as it is)."""

    name: str | None = None
    cron: str | None = None
    timezone: str | None = None
    task: TaskDocument | None = None


@dataclass(frozen=True, slots=True)
class ScheduleService:
    """A tenant's schedules: `check` refuses a task no firing could submit; `tenants` and
    `api_keys` say whom a schedule runs as; `notices` tells this process's scheduler of
    changes on the embedded database."""

    database: Database
    notices: Notices
    tenants: TenantDirectory
    api_keys: ApiKeys
    check: TaskCheck

    async def page(self, caller: Caller, cursor: str | None, limit: int) -> Page[ScheduleRecord]:
        async with self.database.read() as connection:
            return await ScheduleRepository(connection, caller.tenant_id).page(
                cursor=Cursor.decode(cursor) if cursor else None, limit=limit
            )

    async def read(self, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
        async with self.database.read() as connection:
            record = await ScheduleRepository(connection, caller.tenant_id).get(schedule_id)
        if record is None:
            raise NotFound("schedule", schedule_id)
        return record

    async def tasks(
        self, caller: Caller, schedule_id: UUID, cursor: str | None, limit: int
    ) -> Page[TaskRecord]:
        """The tasks the schedule's firings made, newest first."""
        await self.read(caller, schedule_id)
        async with self.database.read() as connection:
            return await TaskRepository(connection, caller.tenant_id).page(
                status=None,
                schedule_id=schedule_id,
                cursor=Cursor.decode(cursor) if cursor else None,
                limit=limit,
            )

    async def create(self, caller: Caller, schedule: NewSchedule) -> ScheduleRecord:
        """Checks its task as a submission by the caller (agent, model, tools), then stores
        it, first firing at the next moment its cron names."""
        await self.check(caller, schedule.task)
        now = utc_now()
        values = {
            "name": schedule.name,
            "agent": schedule.task.agent,
            "request": schedule.task.request,
            "cron": schedule.cron,
            "timezone": schedule.timezone,
            "next_fire_at": next_fire(schedule.cron, schedule.timezone, now),
            "created_by": caller.subject,
            "roles": sorted(caller.roles),
            "api_key_id": None
            if caller.principal.api_key is None
            else UUID(caller.principal.api_key),
        }
        async with self.database.transaction() as connection:
            record = await ScheduleRepository(connection, caller.tenant_id).create(values, at=now)
            await _audit(
                connection, caller, caller.tenant, AuditAction.SCHEDULE_CREATE, None, record
            )
        self._announce()
        return record

    async def update(
        self, caller: Caller, schedule_id: UUID, changed: ScheduleChanges
    ) -> ScheduleRecord:
        """Changes the fields given; a new task is checked as its creator's submission; a
        new cron or time zone sets the next firing anew."""
        before = await self._manageable(caller, schedule_id)
        changes: dict[str, Any] = {}
        if changed.name is not None:
            changes["name"] = changed.name
        if changed.cron is not None:
            changes["cron"] = changed.cron
        if changed.timezone is not None:
            changes["timezone"] = changed.timezone
        if changed.task is not None:
            changes["agent"], changes["request"] = changed.task.agent, changed.task.request
            owner = await runs_as(
                before, database=self.database, tenants=self.tenants, api_keys=self.api_keys
            )
            await self.check(owner, changed.task)
        changes = {name: value for name, value in changes.items() if getattr(before, name) != value}
        if not changes:
            return before
        now = utc_now()
        if before.status == "active" and {"cron", "timezone"} & set(changes):
            cron, timezone = (
                changes.get("cron", before.cron),
                changes.get("timezone", before.timezone),
            )
            changes["next_fire_at"] = next_fire(cron, timezone, now)
        return await self._change(caller, before, changes)

    async def pause(self, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
        """No firing until it is resumed; pausing a paused schedule changes nothing."""
        before = await self._manageable(caller, schedule_id)
        if before.status == "paused":
            return before
        return await self._change(caller, before, {"status": "paused", "next_fire_at": None})

    async def resume(self, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
        """Fires again from the next moment its cron names (firings missed while paused are
        not made up for)."""
        before = await self._manageable(caller, schedule_id)
        if before.status == "active":
            return before
        try:
            following = next_fire(before.cron, before.timezone, utc_now())
        except InvalidCron as exc:  # stored before such crons were refused: it was paused for it
            raise ScheduleUnresumable(
                f"it cannot resume: {exc}; give it another cron first"
            ) from None
        return await self._change(caller, before, {"status": "active", "next_fire_at": following})

    async def delete(self, caller: Caller, schedule_id: UUID) -> None:
        """No more firings; the tasks it made stay (still tagged with its id)."""
        before = await self._manageable(caller, schedule_id)
        async with self.database.transaction() as connection:
            if not await ScheduleRepository(connection, caller.tenant_id).delete(schedule_id):
                raise NotFound("schedule", schedule_id)
            await _audit(
                connection, caller, caller.tenant, AuditAction.SCHEDULE_DELETE, before, None
            )
        self._announce()

    async def _manageable(self, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
        """The schedule, if the caller may change it: members their own, tenant admins any."""
        record = await self.read(caller, schedule_id)
        if record.created_by != caller.subject and not cancels_any_task(caller.roles):
            raise Forbidden(
                "members manage only their own schedules; this one is another user's",
                permission=Permission.SCHEDULE_MANAGE,
            )
        return record

    async def _change(
        self, caller: Caller, before: ScheduleRecord, changes: dict[str, Any]
    ) -> ScheduleRecord:
        async with self.database.transaction() as connection:
            record = await ScheduleRepository(connection, caller.tenant_id).update(
                before.id, changes, at=utc_now()
            )
            if record is None:
                raise NotFound("schedule", before.id)
            await _audit(
                connection, caller, caller.tenant, AuditAction.SCHEDULE_UPDATE, before, record
            )
        self._announce()
        return record

    def _announce(self) -> None:
        """The embedded database's one process is told here (Postgres told every instance at
        COMMIT)."""
        if self.database.is_sqlite:
            self.notices.deliver(SCHEDULES, "")


def _audited(record: ScheduleRecord, _fields: set[str] | None) -> dict[str, Any]:
    return {name: getattr(record, name) for name in _AUDITED}


_audit = ResourceAudit("schedule", _audited)
