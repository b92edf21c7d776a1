"""The scheduler: fires the tenants' schedules when they are due, on every instance at once,
each firing on exactly one of them.

It sleeps until the earliest `next_fire_at` of any active schedule, woken early when schedules
change (`changed`, which a notice calls); nothing polls. A due firing is claimed by moving the
schedule's `next_fire_at` on in one compare-and-set statement, so of the instances that wake
for it exactly one fires it. The next firing is the schedule's first after *now*: an instance
that was down for hours fires a missed schedule once, not once per missed firing.

A firing whose previous task still runs is skipped and counted; one whose submission is
refused (a quota, an archived agent...) is recorded as the schedule's `last_error`. A schedule
whose cron names no further firing (within `MAX_YEARS_BETWEEN_FIRINGS`) fires this once and is
paused, saying why in `last_error`. A process
that dies between the claim and the submission loses that one firing (at most once)."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from uuid import UUID

from app.errors import OmniForgeError
from app.resources.schedules.cron import InvalidCron, next_fire
from app.resources.schedules.store import ScheduleRecord, ScheduleStore

logger = logging.getLogger(__name__)

MAX_SLEEP_S = 3600.0
"""The longest the scheduler sleeps without looking again (a notice lost to a dropped
connection is caught up with on reconnect; this bounds any other surprise, such as the
host's clock being set)."""
RETRY_S = 5.0
"""How long it waits after the database failed it."""


class FiringRefused(OmniForgeError):
    """A firing's task was not accepted; the message says why (kept on the schedule)."""


Fire = Callable[[ScheduleRecord, datetime], Awaitable[UUID]]
"""Submits a schedule's task for the firing at the given moment; returns the task's id, or
raises `FiringRefused`."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Scheduler:
    """Fires due schedules through `fire`; `clock` is the time it fires by (tests move it)."""

    def __init__(
        self,
        store: ScheduleStore,
        fire: Fire,
        *,
        clock: Callable[[], datetime] = _utc_now,
        max_sleep_s: float = MAX_SLEEP_S,
    ) -> None:
        self._store = store
        self._fire = fire
        self._clock = clock
        self._max_sleep_s = max_sleep_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def changed(self, _payload: str = "") -> None:
        """Schedules changed: look again for the next firing (a notice's listener)."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
            self._task = None

    async def tick(self) -> int:
        """Fires the schedules due now (those this instance claims); returns how many it
        claimed."""
        now = self._clock()
        claimed = 0
        for schedule in await self._store.due(now):
            fire_at = schedule.next_fire_at
            assert fire_at is not None  # due ones have one
            try:
                following: datetime | None = next_fire(schedule.cron, schedule.timezone, now)
                stopped = None
            except InvalidCron as exc:  # stored before such expressions were refused
                following, stopped = None, f"paused: {exc}"
            if not await self._store.claim(schedule.id, fire_at, following):
                continue  # another instance fired it, or it was paused or changed
            claimed += 1
            await self._fire_claimed(schedule, fire_at)
            if stopped is not None:
                await self._store.failed(schedule.id, fire_at, stopped)
        return claimed

    async def _fire_claimed(self, schedule: ScheduleRecord, fire_at: datetime) -> None:
        if await self._store.still_running(schedule.id):
            await self._store.skipped(schedule.id, fire_at)
            return
        try:
            task_id = await self._fire(schedule, fire_at)
        except FiringRefused as exc:
            await self._store.failed(schedule.id, fire_at, str(exc))
            return
        except Exception:
            logger.exception("schedule %s failed to fire", schedule.id)
            await self._store.failed(schedule.id, fire_at, "an unexpected error; it was logged")
            return
        await self._store.fired(schedule.id, fire_at, task_id)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.tick()
                wait_s = self._until(await self._store.next_fire_at())
            except Exception:
                logger.warning("firing schedules failed; trying again", exc_info=True)
                wait_s = RETRY_S
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()

    def _until(self, at: datetime | None) -> float:
        if at is None:
            return self._max_sleep_s
        return min(self._max_sleep_s, max(0.0, (at - self._clock()).total_seconds()))
