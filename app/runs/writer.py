"""The one writer of a process: every run's events, and the audit rows of requests, stored in
group commits and then published.

What it does when storing fails is its policy, the same for everything it writes:

- A failure a retry can cure (`app.storage.errors.is_transient`: the connection, a
  serialization failure, a deadlock) is retried after `retry_delays_s`.
- Any other failure is about the data: the group is split in halves and each half stored on
  its own, down to the one write the database refuses, at once and without delay. One bad row
  costs the rest of its group a few round trips, never seconds, and never their place.
- A run whose write is refused is ended there and then: its agent is cancelled and its closing
  events (`chain_failed` with `internal_error`, `done` with `failed`) are stored right after its
  last stored event, with the cost rows of what could not be stored, so nothing spent goes
  unbilled and no stream is left without `done`. Should even that fail (the database is gone),
  the task stays unfinished in the database, owned by this process but no longer live in it:
  the recovery at this process's next lease renewal ends it.
- Refused audit rows fail the request that waits for them; rows nobody waits for are logged as
  an error and counted (`omniforge_audit_rows_dropped_total`), never dropped silently.
"""

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.chain import ChainEvent, ErrorCode
from app.runs.channel import StreamEvent
from app.runs.live import LiveRun
from app.runs.metrics import RunMetrics
from app.storage.errors import is_transient
from app.storage.run_log import RunLog, RunWrite

logger = logging.getLogger(__name__)

RETRY_DELAYS_S = (0.1, 0.5, 2.0, 5.0)
MAX_GROUP = 1000


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

    @property
    def lazy(self) -> bool:
        return self.stored is None


@dataclass(frozen=True, slots=True)
class _RunEnd:
    """A run to end `failed` without its agent (its recording failed)."""

    live: LiveRun
    message: str


_Item = _RunBatch | _Audit | _RunEnd


class RunWriter:
    """Stores what runs and requests queue, in order, one group at a time."""

    def __init__(
        self,
        log: RunLog,
        metrics: RunMetrics,
        *,
        audit_flush_s: float = 0.2,
        retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
    ) -> None:
        self._log = log
        self._metrics = metrics
        self._audit_flush_s = audit_flush_s
        self._retry_delays_s = tuple(retry_delays_s)
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
        they are stored: many requests' rows share one commit with the runs' writes."""
        stored = asyncio.get_running_loop().create_future()
        self._put(_Audit(rows, stored))
        await stored

    def queue_audit(self, rows: list[dict[str, Any]]) -> None:
        """Queues audit rows without waiting: they are stored with the runs' next write, or at
        most `audit_flush_s` later, so that frequent requests (stream opens) add no commit of
        their own. Until then a crash of the process loses them; `close()` stores them."""
        self._put(_Audit(rows, None))

    async def close(self) -> None:
        """Stores what is queued, then stops."""
        if self._task is None:
            return
        with contextlib.suppress(Exception):  # logged where it failed
            await self.record_audit([])  # behind everything queued before it
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
        for item, error in await self._store(writes):
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
        if ending:
            await self._end(list(ending.values()))

    async def _store(self, items: list[_RunBatch | _Audit]) -> list[tuple[_Item, Exception]]:
        """Stores `items`, publishing each run batch once stored; returns the items the
        database refused, with why. Batches of a broken run are neither stored nor published
        (their costs are kept)."""
        pending: list[_RunBatch | _Audit] = []
        for item in items:
            if isinstance(item, _RunBatch) and item.live.broken:
                await self._keep_costs(item)
            else:
                pending.append(item)
        if not pending:
            return []
        writes = [item.write for item in pending if isinstance(item, _RunBatch)]
        audits = [row for item in pending if isinstance(item, _Audit) for row in item.rows]
        try:
            await self._append(writes, audits)
        except Exception as error:
            if is_transient(error) or len(pending) == 1:
                for item in pending:
                    if isinstance(item, _RunBatch):
                        item.live.broken = True
                        item.live.lost_costs.extend(item.write.costs)
                return [(item, error) for item in pending]
            middle = len(pending) // 2
            refused = await self._store(pending[:middle])
            return refused + await self._store(pending[middle:])
        for item in pending:
            if isinstance(item, _Audit):
                if item.stored is not None and not item.stored.done():
                    item.stored.set_result(None)
                continue
            live = item.live
            live.channel.publish(item.events)
            if item.last:
                live.channel.close()
                live.stored.set()
        return []

    async def _append(self, writes: list[RunWrite], audits: Sequence[dict[str, Any]] = ()) -> None:
        """One group commit; failures a retry can cure are retried after `retry_delays_s`."""
        for delay in (*self._retry_delays_s, None):
            try:
                await self._log.append(writes, audits)
            except Exception as error:
                if delay is None or not is_transient(error):
                    raise
                self._metrics.storage_retries.inc()
                logger.warning("storing run events failed; retrying in %.1f s", delay)
                await asyncio.sleep(delay)
            else:
                return

    async def _keep_costs(self, item: _RunBatch) -> None:
        """A batch of a broken run: its steps are not stored, its costs are. Before the run's
        end is written they go with it; after, on their own."""
        live = item.live
        if not item.write.costs:
            return
        if not live.stored.is_set():
            live.lost_costs.extend(item.write.costs)
            return
        chain_id = live.recorder.chain.id
        costs = RunWrite(live.task_id, chain_id, live.stored_seq, costs=item.write.costs)
        try:
            await self._append([costs])
        except Exception:
            logger.exception("the cost records of task %s could not be stored", live.task_id)

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
            await self._append([write for _, write, _ in closing])
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
        return {id(live) for live, _, _ in closing}

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
