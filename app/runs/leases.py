"""This process's runner lease: registered at start, renewed every heartbeat, given up at
stop. Each renewal also gives back to the queue the runs of runners that are gone, to be
resumed by whoever claims them."""

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from uuid import UUID, uuid4

from app.chain.models import utc_now
from app.storage.run_log import RunLog, RunnerLease

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Keeps this process's lease. `holds(task_id)` says whether a task this process owns in
    the store is live or being started here; one it owns but does not hold lost its run (its
    end could not be stored) and goes back to the queue too."""

    def __init__(self, log: RunLog, *, heartbeat_s: float, holds: Callable[[UUID], bool]) -> None:
        self._log = log
        self._heartbeat_s = heartbeat_s
        self._holds = holds
        self._task: asyncio.Task[None] | None = None
        self.lease = RunnerLease(
            id=f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}",
            hostname=socket.gethostname(),
            pid=os.getpid(),
            started_at=utc_now(),
        )

    @property
    def runner_id(self) -> str:
        return self.lease.id

    @property
    def lease_s(self) -> float:
        """A runner silent for this long is presumed dead and its runs are resumed elsewhere."""
        return 3 * self._heartbeat_s

    async def start(self) -> None:
        """Registers this runner, takes back the runs of runners that are gone, and keeps
        the lease renewed."""
        await self._log.register_runner(self.lease)
        await self.recover()
        self._task = asyncio.create_task(self._keep(), name="runner-lease")

    async def recover(self) -> int:
        """Gives back to the queue the runs of runners that are gone (and runs of this one
        that it does not hold). Returns how many."""
        released = await self._log.release_orphans(self.lease, lease_s=self.lease_s, now=utc_now())
        owned = await self._log.owned(self.runner_id)
        # Told apart now, after the read: a task claimed while it ran is held.
        lost = [task_id for task_id in owned if not self._holds(task_id)]
        if lost:
            released += await self._log.release(lost, self.runner_id)
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
            await self._log.remove_runner(self.runner_id)
        except Exception:  # the lease lapses on its own
            logger.warning("could not remove runner %s", self.runner_id, exc_info=True)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self._log.renew_lease(self.runner_id, utc_now())
                await self.recover()
            except Exception:
                logger.warning("renewing the runner lease failed; retrying", exc_info=True)
