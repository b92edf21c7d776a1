"""A tenant's schedules on behalf of a caller: each change stored with its audit row in one
transaction, then announced to every instance's scheduler."""

from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.errors import SCHEDULE_UNRESUMABLE, ApiError
from app.api.schedules.firing import runs_as
from app.api.schedules.schemas import (
    ScheduleCreate,
    ScheduleOut,
    SchedulePage,
    ScheduleUpdate,
    task_document,
)
from app.api.state import AppState
from app.api.tasks.schemas import TaskOut, TaskPage
from app.api.tasks.service import run_policy
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.resources.cron import InvalidCron, next_fire
from app.runs.agents import resolve_agent
from app.runs.errors import Forbidden, NotFound
from app.security.rbac import Permission, cancels_any_task
from app.storage.notify import SCHEDULES
from app.storage.pagination import Cursor
from app.storage.schedules import ScheduleRecord, ScheduleRepository
from app.storage.tasks import TaskRepository

_AUDITED = ("name", "agent", "request", "cron", "timezone", "status")


async def list_schedules(
    state: AppState, caller: Caller, cursor: str | None, limit: int
) -> SchedulePage:
    async with state.database.read() as connection:
        page = await ScheduleRepository(connection, caller.tenant_id).page(
            cursor=Cursor.decode(cursor) if cursor else None, limit=limit
        )
    return SchedulePage(
        items=[ScheduleOut.of(record) for record in page.items], next_cursor=page.next_cursor
    )


async def read_schedule(state: AppState, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
    async with state.database.read() as connection:
        record = await ScheduleRepository(connection, caller.tenant_id).get(schedule_id)
    if record is None:
        raise NotFound("schedule", schedule_id)
    return record


async def schedule_tasks(
    state: AppState, caller: Caller, schedule_id: UUID, cursor: str | None, limit: int
) -> TaskPage:
    """The tasks the schedule's firings made, newest first."""
    await read_schedule(state, caller, schedule_id)
    async with state.database.read() as connection:
        page = await TaskRepository(connection, caller.tenant_id).page(
            status=None,
            schedule_id=schedule_id,
            cursor=Cursor.decode(cursor) if cursor else None,
            limit=limit,
        )
    return TaskPage(items=[TaskOut.of(task) for task in page.items], next_cursor=page.next_cursor)


async def create_schedule(state: AppState, caller: Caller, body: ScheduleCreate) -> ScheduleOut:
    """Checks its task as a submission by the caller (agent, model, tools), then stores it,
    first firing at the next moment its cron names."""
    agent, request = task_document(body.task)
    async with state.database.read() as connection:
        resolved = await resolve_agent(connection, caller.tenant_id, agent)
    state.runs.validate(body.task, await run_policy(state, caller), resolved)
    now = utc_now()
    values = {
        "name": body.name,
        "agent": agent,
        "request": request,
        "cron": body.cron,
        "timezone": body.timezone,
        "next_fire_at": next_fire(body.cron, body.timezone, now),
        "created_by": caller.subject,
        "roles": sorted(caller.roles),
        "api_key_id": None if caller.principal.api_key is None else UUID(caller.principal.api_key),
    }
    async with state.database.transaction() as connection:
        record = await ScheduleRepository(connection, caller.tenant_id).create(values, at=now)
        await _audit(connection, caller, AuditAction.SCHEDULE_CREATE, None, record)
    _announce(state)
    return ScheduleOut.of(record)


async def update_schedule(
    state: AppState, caller: Caller, schedule_id: UUID, body: ScheduleUpdate
) -> ScheduleOut:
    """Changes the fields given; a new task is checked as its creator's submission; a new
    cron or time zone sets the next firing anew."""
    before = await _manageable(state, caller, schedule_id)
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name
    if body.cron is not None:
        changes["cron"] = body.cron
    if body.timezone is not None:
        changes["timezone"] = body.timezone
    if body.task is not None:
        changes["agent"], changes["request"] = task_document(body.task)
        owner = await runs_as(state, before)
        async with state.database.read() as connection:
            resolved = await resolve_agent(connection, owner.tenant_id, changes["agent"])
        state.runs.validate(body.task, await run_policy(state, owner), resolved)
    changes = {name: value for name, value in changes.items() if getattr(before, name) != value}
    if not changes:
        return ScheduleOut.of(before)
    now = utc_now()
    if before.status == "active" and {"cron", "timezone"} & set(changes):
        cron, timezone = changes.get("cron", before.cron), changes.get("timezone", before.timezone)
        changes["next_fire_at"] = next_fire(cron, timezone, now)
    return await _change(state, caller, before, changes)


async def pause_schedule(state: AppState, caller: Caller, schedule_id: UUID) -> ScheduleOut:
    """No firing until it is resumed; pausing a paused schedule changes nothing."""
    before = await _manageable(state, caller, schedule_id)
    if before.status == "paused":
        return ScheduleOut.of(before)
    return await _change(state, caller, before, {"status": "paused", "next_fire_at": None})


async def resume_schedule(state: AppState, caller: Caller, schedule_id: UUID) -> ScheduleOut:
    """Fires again from the next moment its cron names (firings missed while paused are
    not made up for)."""
    before = await _manageable(state, caller, schedule_id)
    if before.status == "active":
        return ScheduleOut.of(before)
    try:
        following = next_fire(before.cron, before.timezone, utc_now())
    except InvalidCron as exc:  # stored before such crons were refused: it was paused for it
        raise ApiError(
            SCHEDULE_UNRESUMABLE, f"it cannot resume: {exc}; give it another cron first"
        ) from None
    return await _change(state, caller, before, {"status": "active", "next_fire_at": following})


async def delete_schedule(state: AppState, caller: Caller, schedule_id: UUID) -> None:
    """No more firings; the tasks it made stay (still tagged with its id)."""
    before = await _manageable(state, caller, schedule_id)
    async with state.database.transaction() as connection:
        if not await ScheduleRepository(connection, caller.tenant_id).delete(schedule_id):
            raise NotFound("schedule", schedule_id)
        await _audit(connection, caller, AuditAction.SCHEDULE_DELETE, before, None)
    _announce(state)


async def _manageable(state: AppState, caller: Caller, schedule_id: UUID) -> ScheduleRecord:
    """The schedule, if the caller may change it: members their own, tenant admins any."""
    record = await read_schedule(state, caller, schedule_id)
    if record.created_by != caller.subject and not cancels_any_task(caller.roles):
        raise Forbidden(
            "members manage only their own schedules; this one is another user's",
            permission=Permission.SCHEDULE_MANAGE,
        )
    return record


async def _change(
    state: AppState, caller: Caller, before: ScheduleRecord, changes: dict[str, Any]
) -> ScheduleOut:
    async with state.database.transaction() as connection:
        record = await ScheduleRepository(connection, caller.tenant_id).update(
            before.id, changes, at=utc_now()
        )
        if record is None:
            raise NotFound("schedule", before.id)
        await _audit(connection, caller, AuditAction.SCHEDULE_UPDATE, before, record)
    _announce(state)
    return ScheduleOut.of(record)


def _announce(state: AppState) -> None:
    """The embedded database's one process is told here (Postgres told every instance at
    COMMIT)."""
    if state.database.is_sqlite:
        state.run_stores.notices.deliver(SCHEDULES, "")


async def _audit(
    connection: AsyncConnection,
    caller: Caller,
    action: AuditAction,
    before: ScheduleRecord | None,
    after: ScheduleRecord | None,
) -> None:
    subject = after or before
    assert subject is not None
    await record_change(
        connection,
        caller,
        caller.tenant_id,
        action=action,
        before=None if before is None else _audited(before),
        after=None if after is None else _audited(after),
        resource_type="schedule",
        resource_id=str(subject.id),
    )


def _audited(record: ScheduleRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in _AUDITED}
