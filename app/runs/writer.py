"""The one writer of a process: every run's events, and the audit rows of requests, stored in
group commits and then published.

What it does when storing fails is its policy, the same for everything it writes:

- A failure a retry can cure (`app.storage.errors.is_transient`: the connection, a
  serialization failure, a deadlock) closes the store gate — runs then start no new call — and
  the group is tried again, at most `RETRY_DELAYS_S[-1]` apart, for as long as the outage
  lasts, up to `outage_s`. Nothing of it is lost meanwhile: calls that were under way finish
  and their results wait here to be stored, once. A request waiting for its audit rows is not
  kept waiting: it fails at once (`StoreUnavailable`, a 503). Past `outage_s` the runs of the
  group are let go for another run of their tasks to resume from what is stored (never
  failed): their unstored results are dropped and counted as calls cut.
- A write refused because its run no longer holds its task (the fence: its runner's lease was
  given to another) is dropped, and the run is stopped at once, for the task's new holder.
- Any other failure is about the data: the group is split in halves and each half stored on
  its own, down to the one write the database refuses, at once and without delay. One bad row
  costs the rest of its group a few round trips, never seconds, and never their place.
- A run whose write is refused for its data is ended there and then: its agent is cancelled
  and its closing events (`chain_failed` with `internal_error`, `done` with `failed`) are
  stored right after its last stored event, with the cost rows of the write that could not be
  stored, so nothing spent goes unbilled and no stream is left without `done`. Should even
  that fail, the task stays unfinished in the database, held by this process but no longer
  live in it: the recovery at this process's next lease renewal gives it back to the queue.
- Refused audit rows fail the request that waits for them; rows nobody waits for are logged as
  an error and counted (`omniforge_audit_rows_dropped_total`), never dropped silently.
"""

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.chain import ChainEvent, ErrorCode
from app.errors import OmniForgeError
from app.runs.channel import StreamEvent
from app.runs.live import LiveRun
from app.runs.metrics import RunMetrics
from app.runs.outage import StoreGate
from app.storage.errors import StoreUnavailable, describe, is_transient
from app.storage.runs import RunWrite, RunWrites

logger = logging.getLogger(__name__)

RETRY_DELAYS_S = (0.1, 0.25, 0.5, 1.0)
"""Between tries of a group while the store is unavailable; the last repeats, so runs go on
within about a second of the store's return."""
MAX_GROUP = 1000
OUTAGE_S = 300.0


@dataclass(frozen=True, slots=True)
class _RunBatch:
    """One batch of a run's events: stored, then published."""

    live: LiveRun
    write: RunWrite
    events: list[StreamEvent]
    last: bool


@dataclass(frozen=True, slots=True)
class _Audit:
    """Audit rows of requests (chain reads, stream opens); a request that does not wait for
    them (`stored` None) lets them wait for company."""

    rows: list[dict[str, Any]]
    stored: asyncio.Future[None] | None
    # A request waits for them: during an outage it is answered at once (503), not kept
    # waiting; a marker (`flushed`) waits for everything before it.
    request: bool = True

    @property
    def lazy(self) -> bool:
        return self.stored is None


@dataclass(frozen=True, slots=True)
class _RunEnd:
    """A run to end `failed` without its agent (its recording failed)."""

    live: LiveRun
    message: str


_Item = _RunBatch | _Audit | _RunEnd


class _OutageTooLong(OmniForgeError):
    """The store has been unavailable for longer than the writer waits for it."""


class RunWriter:
    """Stores what runs and requests queue, in order, one group at a time."""

    def __init__(
        self,
        writes: RunWrites,
        metrics: RunMetrics,
        gate: StoreGate | None = None,
        *,
        audit_flush_s: float = 0.2,
        retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
        outage_s: float = OUTAGE_S,
    ) -> None:
        self._writes = writes
        self._metrics = metrics
        self.gate = gate or StoreGate()
        self._audit_flush_s = audit_flush_s
        self._retry_delays_s = tuple(retry_delays_s)
        self._outage_s = outage_s
        self._pending: asyncio.Queue[_Item] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def queue_batch(
        self, live: LiveRun, write: RunWrite, events: list[StreamEvent], *, last: bool
    ) -> None:
        self._put(_RunBatch(live, write, events, last))

    def queue_end(self, live: LiveRun, message: str) -> None:
        """Ends a run whose events can no longer be recorded (after what is queued of it)."""
        self._put(_RunEnd(live, message))

    async def record_audit(self, rows: list[dict[str, Any]]) -> None:
        """Stores audit rows (each with its `tenant_id`) with the next group, and returns once
        they are stored: many requests' rows share one commit with the runs' writes. While
        the store is unavailable, fails at once (`StoreUnavailable`)."""
        if not self.gate.is_open:
            raise StoreUnavailable("the store is unavailable")
        stored = asyncio.get_running_loop().create_future()
        self._put(_Audit(rows, stored))
        await stored

    def queue_audit(self, rows: list[dict[str, Any]]) -> None:
        """Queues audit rows without waiting: they are stored with the runs' next write, or at
        most `audit_flush_s` later, so that frequent requests (stream opens) add no commit of
        their own. Until then a crash of the process loses them; `close()` stores them."""
        self._put(_Audit(rows, None))

    async def flushed(self) -> None:
        """Returns once everything queued so far is stored (or given up on)."""
        if self._task is None:
            return
        done = asyncio.get_running_loop().create_future()
        self._put(_Audit([], done, request=False))
        with contextlib.suppress(Exception):  # logged where it failed
            await done

    async def close(self) -> None:
        """Stores what is queued, then stops."""
        if self._task is None:
            return
        await self.flushed()
        self._task.cancel()
        await asyncio.wait([self._task])
        self._task = None

    def _put(self, item: _Item) -> None:
        self._pending.put_nowait(item)
        if self._task is None:
            self._task = asyncio.create_task(self._write_groups(), name="run-writer")

    async def _write_groups(self) -> None:
        while True:
            group = await self._next_group()
            try:
                await self._write(group)
            except Exception:  # a bug here must not stop every run's writes for good
                logger.exception("the run writer failed on a group of %d", len(group))

    async def _next_group(self) -> list[_Item]:
        """Whatever was queued while the previous group was being stored (group commit); audit
        rows nobody waits for wait (a little) for something else to commit with."""
        loop = asyncio.get_running_loop()
        group = [await self._pending.get()]
        deadline = loop.time() + self._audit_flush_s
        while all(isinstance(item, _Audit) and item.lazy for item in group):
            try:
                async with asyncio.timeout_at(deadline):
                    group.append(await self._pending.get())
            except TimeoutError:
                break
        while not self._pending.empty() and len(group) < MAX_GROUP:
            group.append(self._pending.get_nowait())
        return group

    async def _write(self, group: list[_Item]) -> None:
        # A run's end comes after all its batches (nothing is queued of it afterwards).
        ending = {item.live.task_id: item for item in group if isinstance(item, _RunEnd)}
        writes = [item for item in group if not isinstance(item, _RunEnd)]
        try:
            refused = await self._store(writes)
        except _OutageTooLong:
            self._give_up(writes)
            refused = []
        for item, error in refused:
            if isinstance(item, _Audit):
                self._refuse_audit(item, error)
                continue
            self._metrics.storage_refused.labels("run").inc()
            logger.error(
                "storing task %s's events failed; ending its run",
                item.live.task_id,
                exc_info=error,
            )
            message = f"its events could not be stored ({type(error).__name__})"
            ending.setdefault(item.live.task_id, _RunEnd(item.live, message))
        ends = [end for end in ending.values() if not end.live.lost]
        if ends:
            await self._end(ends)

    async def _store(self, items: list[_RunBatch | _Audit]) -> list[tuple[_Item, Exception]]:
        """Stores `items`, publishing each run batch once stored; returns the items the
        database refused for their data, with why. Batches of a run that is broken (its
        events can no longer be stored) are neither stored nor published."""
        pending: list[_RunBatch | _Audit] = []
        for item in items:
            if isinstance(item, _RunBatch) and item.live.broken:
                continue
            pending.append(item)
        if not pending:
            return []
        try:
            lost = await self._append(pending)
        except _OutageTooLong:
            raise
        except Exception as error:
            if len(pending) == 1:
                item = pending[0]
                if isinstance(item, _RunBatch):
                    item.live.broken = True
                    item.live.lost_costs.extend(item.write.costs)
                return [(item, error)]
            middle = len(pending) // 2
            refused = await self._store(pending[:middle])
            return refused + await self._store(pending[middle:])
        for item in pending:
            if isinstance(item, _Audit):
                if item.stored is not None and not item.stored.done():
                    item.stored.set_result(None)
                continue
            live = item.live
            if live.task_id in lost:
                live.let_go(self._metrics, "lost", "another instance holds its task now")
                continue
            if live.lost:
                continue
            live.published(item.write)
            live.channel.publish(item.events)
            if item.last:
                live.channel.close()
                live.stored.set()
        return []

    async def _append(self, items: list[_RunBatch | _Audit]) -> set[UUID]:
        """One group commit; failures a retry can cure are tried again for as long as the
        store's outage lasts (up to `outage_s`). Returns the tasks whose runs lost them."""
        attempt = 0
        started = asyncio.get_running_loop().time()
        while True:
            writes = [item.write for item in items if isinstance(item, _RunBatch)]
            audits = [row for item in items if isinstance(item, _Audit) for row in item.rows]
            try:
                lost = await self._writes.append(writes, audits)
            except Exception as error:
                if not is_transient(error):
                    raise
                self.gate.failed()
                # Requests waiting for their rows are answered now, not after the outage.
                items = [item for item in items if not _fail_waiting(item, error)]
                if asyncio.get_running_loop().time() - started > self._outage_s:
                    for item in items:  # nothing waits for it any more
                        if isinstance(item, _Audit) and item.stored and not item.stored.done():
                            item.stored.set_exception(StoreUnavailable("store outage"))
                    raise _OutageTooLong from error
                self._metrics.storage_retries.inc()
                delay = self._retry_delays_s[min(attempt, len(self._retry_delays_s) - 1)]
                attempt += 1
                if attempt == 1:
                    logger.warning("storing run events failed; trying again (%s)", describe(error))
                await asyncio.sleep(delay)
                continue
            self.gate.succeeded()
            return lost

    def _give_up(self, items: Sequence[_RunBatch | _Audit]) -> None:
        """The store stayed unavailable past `outage_s`: the group's runs are let go (their
        tasks resumed by whoever claims them once the store is back), its lazy audit rows
        counted as lost."""
        for item in items:
            if isinstance(item, _RunBatch):
                if not item.live.lost:
                    message = f"the store was unavailable for more than {self._outage_s:g} s"
                    item.live.let_go(self._metrics, "outage", message)
            elif item.lazy:
                self._metrics.audit_rows_dropped.inc(len(item.rows))
                logger.error("%d audit rows were lost to a store outage", len(item.rows))

    async def _end(self, ends: list[_RunEnd]) -> None:
        """Ends each run `failed`/`internal_error`: its agent is stopped, its closing events
        are stored after its last stored one (with the costs it could not store), and its
        subscribers get them."""
        closing: list[tuple[LiveRun, RunWrite, list[StreamEvent]]] = []
        ended: dict[int, list[ChainEvent]] = {}
        for end in ends:
            live = end.live
            live.broken = True
            live.run.cancel(end.message, ErrorCode.INTERNAL_ERROR)
            write, events, chain_events = live.recorder.end(
                live.stored_seq,
                error_code=ErrorCode.INTERNAL_ERROR,
                message=end.message,
                costs=live.lost_costs,
            )
            live.lost_costs = []
            closing.append((live, write, events))
            ended[id(live)] = chain_events
        stored = await self._store_ends(closing)
        for live, _, events in closing:
            if id(live) in stored:
                self._metrics.observe(live.labels, ended[id(live)])
                live.channel.discard_deltas(after=events[0].seq - 1)
                live.channel.publish(events)
            live.channel.close()
            live.stored.set()

    async def _store_ends(
        self, closing: list[tuple[LiveRun, RunWrite, list[StreamEvent]]]
    ) -> set[int]:
        """The runs (by `id`) whose end could be stored; the rest are left to recovery."""
        try:
            lost = await self._writes.append([write for _, write, _ in closing])
        except Exception as error:
            if is_transient(error) or len(closing) == 1:
                for live, _, _ in closing:
                    logger.error(
                        "the end of task %s could not be stored; recovery will end it",
                        live.task_id,
                        exc_info=error,
                    )
                return set()
            middle = len(closing) // 2
            left = await self._store_ends(closing[:middle])
            return left | await self._store_ends(closing[middle:])
        return {id(live) for live, _, _ in closing if live.task_id not in lost}

    def _refuse_audit(self, audit: _Audit, error: Exception) -> None:
        self._metrics.storage_refused.labels("audit").inc()
        if audit.stored is not None:
            if not audit.stored.done():
                audit.stored.set_exception(error)
            return
        self._metrics.audit_rows_dropped.inc(len(audit.rows))
        logger.error(
            "%d audit rows could not be stored and are lost: %s",
            len(audit.rows),
            [(row.get("tenant_id"), row.get("action")) for row in audit.rows],
            exc_info=error,
        )


def _fail_waiting(item: _RunBatch | _Audit, error: Exception) -> bool:
    """Fails a request's audit rows that it waits for (True: taken out of the group)."""
    if isinstance(item, _Audit) and item.stored is not None and item.request:
        if not item.stored.done():
            failure = StoreUnavailable("the store is unavailable")
            failure.__cause__ = error
            item.stored.set_exception(failure)
        return True
    return False
