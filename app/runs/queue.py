"""The queue's side of this process: it claims queued tasks while it has room, each time
something may have changed (a task was queued here or elsewhere, a run here ended, notices
were missed), woken by notices, never polling. A claimed task is `starting` until its run is
live (or it is ended or given back); what the queue holds counts against the room."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from uuid import UUID

from app.runs.background import Background
from app.runs.outage import StoreGate
from app.storage.errors import describe, is_transient
from app.storage.records import TaskRecord
from app.storage.runs import TaskQueue

logger = logging.getLogger(__name__)


class RunQueue:
    """Claims for one runner (`me`): at most `max_runs` runs live (`running()`) or starting
    at once; each claimed task is handed to `launch`."""

    def __init__(
        self,
        store: TaskQueue,
        *,
        me: str,
        max_runs: int,
        running: Callable[[], int],
        launch: Callable[[TaskRecord], Awaitable[None]],
        gate: StoreGate | None = None,
    ) -> None:
        self._store = store
        self._me = me
        self.max_runs = max_runs
        self._running = running
        self._launch = launch
        self._gate = gate or StoreGate()
        # Claimed tasks whose runs are being started (or that are being given back), with
        # the epochs of their claims.
        self._starting: dict[UUID, int] = {}
        # Whether the queue may hold tasks: set by every notice of one queued, cleared when a
        # claim finds fewer than it asked for and no notice came meanwhile. Room freed here
        # claims only then (a run's end costs no query while nothing waits).
        self._maybe_queued = True
        self._notices = 0
        self._claims = 0
        self._wake = asyncio.Event()
        self._draining = False
        self._claimer: asyncio.Task[None] | None = None
        self._background = Background()

    def __contains__(self, task_id: object) -> bool:
        """Whether the task is claimed here and not yet live."""
        return task_id in self._starting

    @property
    def claiming(self) -> bool:
        """Whether a claim is under way: the tasks it takes are this runner's in the store
        before they are known here."""
        return self._claims > 0

    def room(self) -> int:
        return self.max_runs - self._running() - len(self._starting)

    def wake(self) -> None:
        """Room may have been freed here: claim again if tasks may be waiting."""
        self._wake.set()

    def queued(self) -> None:
        """A task was queued (here or elsewhere), or notices of that may have been missed."""
        self._notices += 1
        self._maybe_queued = True
        self._wake.set()

    def start(self) -> None:
        self._claimer = asyncio.create_task(self._claim_loop(), name="run-claimer")
        self._wake.set()

    def stop_claiming(self) -> None:
        """Claims and reserves nothing from now on (synchronous: callable from a signal)."""
        self._draining = True
        self._wake.set()

    async def stop(self) -> None:
        """Claims nothing more; what is being given back is left to the lease check."""
        self.stop_claiming()
        if self._claimer is not None:
            self._claimer.cancel()
            await asyncio.wait([self._claimer])
        await self._background.cancel()

    def reserve(self, task_id: UUID) -> bool:
        """Takes room for a task this instance is about to store as its own (claimed as it
        is stored, at epoch 1, started at once); False when there is none (it waits in the
        queue)."""
        if self._draining or self.room() <= 0:
            return False
        self._starting[task_id] = 1
        return True

    def start_reserved_soon(self, task: TaskRecord) -> None:
        """`start_reserved` in the background: what submitted it does not wait for it."""
        self._background.spawn(self.start_reserved(task), f"launch-{task.id}")

    def unreserve(self, task_id: UUID) -> None:
        self._starting.pop(task_id, None)

    def drop_starting(self) -> None:
        """The runner lost its lease: the runs being started here are not started (their
        tasks are back in the queue)."""
        self._background.cancel_now()

    def held_back(self, delay_s: float) -> None:
        """A task was given back to be claimed no sooner than `delay_s` from now: claim again
        then (no notice will say so)."""
        asyncio.get_running_loop().call_later(delay_s, self.queued)

    async def start_reserved(self, task: TaskRecord) -> None:
        """Starts a task stored as claimed by this instance (`reserve`). Stopped before its
        run is live (the instance stops), the task goes back to the queue untouched."""
        try:
            await self._launch(task)
        except asyncio.CancelledError:
            await self._give_back({task.id: task.owner_epoch})
            raise
        finally:
            self._starting.pop(task.id, None)

    async def _claim_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._draining:
                return
            room = self.room()
            if room <= 0 or not self._maybe_queued:
                continue
            notices = self._notices
            try:
                claimed = await self._claim(room)
            except Exception as exc:
                if is_transient(exc):
                    # Tried again once the store takes writes (the lease keeper finds out).
                    logger.warning(
                        "claiming queued tasks failed (%s); waiting for the store", describe(exc)
                    )
                    self._gate.failed()
                    await self._gate.wait_open()
                else:
                    logger.exception("claiming queued tasks failed; trying again")
                    await asyncio.sleep(1.0)
                self._wake.set()
                continue
            if len(claimed) < room and self._notices == notices:
                self._maybe_queued = False  # the claim emptied what it saw, nothing came since
            # Submissions here may have taken some of the room while the claim was under way:
            # what no longer fits goes back to the queue at once.
            fits = max(self.room(), 0)
            claimed, extra = claimed[:fits], claimed[fits:]
            for task in claimed:
                self._starting[task.id] = task.owner_epoch
                self._background.spawn(self.start_reserved(task), f"launch-{task.id}")
            if extra:
                back = {task.id: task.owner_epoch for task in extra}
                self._starting.update(back)  # this instance's until they are back in the queue
                self._background.spawn(self._give_back(back), "give-back")
            if len(claimed) == room:
                self._wake.set()  # there may be more

    async def _claim(self, room: int) -> list[TaskRecord]:
        """The store's claim, counted while under way (`claiming`); what it returns is
        marked as starting here before anything else runs."""
        self._claims += 1
        try:
            return await self._store.claim(self._me, room)
        finally:
            self._claims -= 1

    async def _give_back(self, held: dict[UUID, int]) -> None:
        try:
            await self._store.release(self._me, held, resumed=False)
        except Exception:  # the lease check gives them back
            logger.warning("giving claimed tasks back to the queue failed", exc_info=True)
        finally:
            for task_id in held:
                self._starting.pop(task_id, None)
