"""A tenant's schedules (`ScheduleRepository`), and what the scheduler of every instance reads
and claims across tenants (`ScheduleStore`): the next firing, the due schedules, and the
one-statement compare-and-set that gives each firing to exactly one instance."""

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, func, insert, select, text, update

from app.chain import TaskState
from app.ids import uuid4
from app.storage.database import Database
from app.storage.notify import SCHEDULES
from app.storage.pagination import Cursor, Page
from app.storage.repository import TenantScoped
from app.storage.tables import schedules, tasks

ScheduleStatus = Literal["active", "paused"]

_UNFINISHED = [state for state in TaskState if not state.is_terminal]


class ScheduleRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    name: str
    agent: str | None
    request: dict[str, Any]
    cron: str
    timezone: str
    status: ScheduleStatus
    next_fire_at: datetime | None
    created_by: str
    roles: list[str]
    api_key_id: UUID | None
    fired_count: int
    skipped_count: int
    last_fired_at: datetime | None
    last_task_id: UUID | None
    last_skipped_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    created_at: datetime
    updated_at: datetime


class ScheduleRepository(TenantScoped):
    async def get(self, schedule_id: UUID) -> ScheduleRecord | None:
        statement = select(schedules).where(
            schedules.c.tenant_id == self.tenant_id, schedules.c.id == schedule_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else ScheduleRecord.model_validate(row._mapping)

    async def page(self, *, cursor: Cursor | None, limit: int) -> Page[ScheduleRecord]:
        """The tenant's schedules, newest first."""
        c = schedules.c
        statement = select(schedules).where(c.tenant_id == self.tenant_id)
        if cursor is not None:
            statement = statement.where(cursor.before(c.created_at, c.id))
        statement = statement.order_by(c.created_at.desc(), c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        fetched = [ScheduleRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda s: Cursor(s.created_at, s.id))

    async def create(self, values: dict[str, Any], *, at: datetime) -> ScheduleRecord:
        """A new active schedule from `values` (name, agent, request, cron, timezone,
        next_fire_at, created_by, roles, api_key_id)."""
        schedule_id = uuid4()
        await self.connection.execute(
            insert(schedules).values(
                **values,
                id=schedule_id,
                tenant_id=self.tenant_id,
                status="active",
                fired_count=0,
                skipped_count=0,
                created_at=at,
                updated_at=at,
            )
        )
        await self.announce()
        record = await self.get(schedule_id)
        assert record is not None
        return record

    async def update(
        self, schedule_id: UUID, changes: dict[str, Any], *, at: datetime
    ) -> ScheduleRecord | None:
        """The schedule with `changes` (its columns); None if it is not the tenant's."""
        await self.connection.execute(
            update(schedules)
            .where(schedules.c.tenant_id == self.tenant_id, schedules.c.id == schedule_id)
            .values(**changes, updated_at=at)
        )
        await self.announce()
        return await self.get(schedule_id)

    async def delete(self, schedule_id: UUID) -> bool:
        result = await self.connection.execute(
            delete(schedules).where(
                schedules.c.tenant_id == self.tenant_id, schedules.c.id == schedule_id
            )
        )
        await self.announce()
        return bool(result.rowcount)

    async def announce(self) -> None:
        """Tells every instance's scheduler, at COMMIT, that schedules changed (Postgres;
        the embedded database's one process is told by its caller after the commit)."""
        if self.connection.dialect.name == "postgresql":
            await self.connection.execute(
                text("SELECT pg_notify(:channel, '')"), {"channel": SCHEDULES}
            )


class ScheduleStore:
    """The scheduler's reads and claims, keyed by schedule id (firings cross tenants)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def next_fire_at(self) -> datetime | None:
        """When the earliest active schedule fires next."""
        c = schedules.c
        statement = select(func.min(c.next_fire_at)).where(c.status == "active")
        async with self._database.read() as connection:
            at: datetime | None = await connection.scalar(statement)
        return at

    async def due(self, now: datetime, limit: int = 100) -> list[ScheduleRecord]:
        """Active schedules whose next firing is at or before `now`, earliest first."""
        c = schedules.c
        statement = (
            select(schedules)
            .where(c.status == "active", c.next_fire_at <= now)
            .order_by(c.next_fire_at, c.id)
            .limit(limit)
        )
        async with self._database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return [ScheduleRecord.model_validate(row._mapping) for row in rows]

    async def claim(self, schedule_id: UUID, fire_at: datetime, following: datetime | None) -> bool:
        """Takes the firing at `fire_at` for this instance, moving the schedule on to
        `following` (None: pausing it) in one statement: True for exactly one of the
        instances that try."""
        c = schedules.c
        async with self._database.transaction() as connection:
            result = await connection.execute(
                update(schedules)
                .where(c.id == schedule_id, c.status == "active", c.next_fire_at == fire_at)
                .values(
                    next_fire_at=following, status="active" if following is not None else "paused"
                )
            )
        return bool(result.rowcount)

    async def still_running(self, schedule_id: UUID) -> bool:
        """Whether a task an earlier firing made is unfinished."""
        statement = (
            select(tasks.c.id)
            .where(tasks.c.schedule_id == schedule_id, tasks.c.status.in_(_UNFINISHED))
            .limit(1)
        )
        async with self._database.read() as connection:
            return (await connection.scalar(statement)) is not None

    async def fired(self, schedule_id: UUID, fire_at: datetime, task_id: UUID) -> None:
        await self._record(
            schedule_id,
            fired_count=schedules.c.fired_count + 1,
            last_fired_at=fire_at,
            last_task_id=task_id,
            last_error=None,
            last_error_at=None,
        )

    async def skipped(self, schedule_id: UUID, fire_at: datetime) -> None:
        await self._record(
            schedule_id, skipped_count=schedules.c.skipped_count + 1, last_skipped_at=fire_at
        )

    async def failed(self, schedule_id: UUID, fire_at: datetime, error: str) -> None:
        await self._record(schedule_id, last_error=error, last_error_at=fire_at)

    async def _record(self, schedule_id: UUID, **values: Any) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(
                update(schedules).where(schedules.c.id == schedule_id).values(**values)
            )
