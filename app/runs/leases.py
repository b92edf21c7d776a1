"""This process's runner lease: registered at start, renewed every heartbeat, given up at stop.

Each renewal also gives back to the queue the runs of runners whose lease lapsed — judged by
lease time alone, and only over a stretch in which this process itself kept its lease without
a break (after a store outage every runner was silent alike, and none is judged until each had
a whole lease to renew in). A renewal that finds this runner's own lease given up (another
judged it lapsed) stops every run here at once: their tasks are others' now. The runner then
registers again and claims like any other.
"""

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from uuid import UUID

from app.chain.models import utc_now
from app.ids import uuid4
from app.runs.outage import StoreGate
from app.storage.errors import describe, is_transient
from app.storage.runs import RunnerLease, RunnerLeases, TaskQueue

logger = logging.getLogger(__name__)

OUTAGE_RETRY_S = 1.0
"""How often a lease is tried while the store is unavailable (the first renewal after it comes
back also opens the gate that paused runs wait on)."""


class LeaseKeeper:
    """Keeps this process's lease. `holds(task_id)` says whether a task this process holds in
    the store is live or being started here; one it holds but does not run lost its run (its
    end could not be stored) and goes back to the queue too. `lost()` is called when the
    lease turns out to have been given up by another runner."""

    def __init__(
        self,
        runners: RunnerLeases,
        queue: TaskQueue,
        *,
        heartbeat_s: float,
        holds: Callable[[UUID], bool],
        lost: Callable[[], None] = lambda: None,
        gate: StoreGate | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runners = runners
        self._queue = queue
        self._heartbeat_s = heartbeat_s
        self._holds = holds
        self._lost = lost
        self._gate = gate or StoreGate()
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.lease = RunnerLease(
            id=f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}",
            hostname=socket.gethostname(),
            pid=os.getpid(),
            started_at=utc_now(),
            lease_s=3 * heartbeat_s,
        )
        # Since when (monotonic) this runner has kept its lease without a break.
        self._kept_since = clock()
        self._renewed_at = self._kept_since

    @property
    def runner_id(self) -> str:
        return self.lease.id

    @property
    def lease_s(self) -> float:
        """A runner silent for this long is presumed dead and its runs are resumed elsewhere."""
        return self.lease.lease_s

    async def start(self) -> None:
        """Registers this runner, takes back the runs of runners that are gone, and keeps
        the lease renewed."""
        await self._runners.register(self.lease)
        self._kept_since = self._renewed_at = self._clock()
        await self.recover()
        self._task = asyncio.create_task(self._keep(), name="runner-lease")

    def kept_for(self) -> float:
        """How long this runner has kept its lease, and seen the store take writes, without
        a break."""
        return self._gate.steady_since(self._kept_since)

    async def recover(self) -> int:
        """Gives back to the queue the runs of runners whose lease lapsed (and runs of this
        one that it does not hold). Returns how many."""
        released = await self._runners.release_lapsed(self.runner_id, judged_over_s=self.kept_for())
        owned = await self._queue.owned(self.runner_id)
        # Told apart now, after the read: a task claimed while it ran is held.
        lost = {task_id: epoch for task_id, epoch in owned.items() if not self._holds(task_id)}
        if lost:
            released += await self._queue.release(self.runner_id, lost)
        if released:
            logger.warning("%d runs of stopped instances are back in the queue", released)
        return released

    async def stop_renewing(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])

    async def give_up(self) -> None:
        """Removes this runner (its runs must be handed back first)."""
        try:
            await self._runners.remove(self.runner_id)
        except Exception:  # the lease lapses on its own
            logger.warning("could not remove runner %s", self.runner_id, exc_info=True)

    async def _keep(self) -> None:
        while True:
            if self._gate.is_open:
                # Woken early by an outage: tried every OUTAGE_RETRY_S from then on, the first
                # renewal that works opening the gate again.
                await self._gate.wait_closed(self._heartbeat_s)
            else:
                await asyncio.sleep(min(self._heartbeat_s, OUTAGE_RETRY_S))
            try:
                await self.renew()
                await self.recover()
            except Exception as exc:
                if is_transient(exc):
                    self._gate.failed()
                logger.warning("renewing the runner lease failed (%s); trying again", describe(exc))

    async def renew(self) -> None:
        """Renews the lease; finding it given up, stops every run here (`lost`) and registers
        again."""
        held = await self._runners.renew(self.runner_id)
        now = self._clock()
        self._gate.succeeded()
        if not held:
            logger.error(
                "runner %s lost its lease (another instance judged it lapsed): its runs stop "
                "here, and it registers again",
                self.runner_id,
            )
            self._lost()
            await self._runners.register(self.lease)
            self._kept_since = now
        elif now - self._renewed_at > self.lease_s:
            self._kept_since = now  # a break (this process stalled): judge nobody yet
        self._renewed_at = now
