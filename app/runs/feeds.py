"""Streams of runs this process does not run, read once for all their subscribers here.

A task another instance runs (or one between two instances) is followed from the store: each
`EVENTS` notice names the tasks whose events were stored. Every followed task of this process
has one feed, and one reader serves them all: it reads the new events of every task named by
the notices that came since its last read in a single statement, and publishes each task's on
its feed's channel, which its subscribers follow as they would a live run's. However many
subscribers and tasks, a burst of notices costs one read.
"""

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from uuid import UUID

from app.runs.channel import RunChannel, StreamEvent
from app.runs.outage import StoreGate
from app.runs.recorder import stream_event
from app.storage.errors import describe, is_transient
from app.storage.notify import stored_events
from app.storage.runs import StreamReads, TaskQueue
from app.storage.runs.streams import StreamRead

logger = logging.getLogger(__name__)

READ_PAGE = 2000
"""Events read at most per pass, over all feeds (a feed with more is read on next pass)."""
IDLE_S = 15.0
"""A feed nobody heard of for this long is read again (notices may have been lost) and, if
its task has finished with nothing more stored, ended."""

DONE = "done"


@dataclass(slots=True)
class StoredFeed:
    """One task's stored events from `channel.first_seq` on, as this process read them."""

    tenant_id: str
    task_id: UUID
    chain_id: UUID
    channel: RunChannel
    subscribers: int = 0
    # Its task finished with nothing more stored (no `done` will come).
    finished: bool = False


class StoredFeeds:
    """The feeds of this process, and the one reader that fills them."""

    def __init__(
        self,
        streams: StreamReads,
        queue: TaskQueue,
        gate: StoreGate,
        *,
        idle_s: float = IDLE_S,
    ) -> None:
        self._streams = streams
        self._queue = queue
        self._gate = gate
        self._idle_s = idle_s
        self._feeds: dict[UUID, StoredFeed] = {}
        self._dirty: set[UUID] = set()
        self._wake = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._feeds)

    @contextlib.contextmanager
    def joined(
        self, tenant_id: str, task_id: UUID, chain_id: UUID, after: int
    ) -> Iterator[StoredFeed]:
        """The task's feed while the block runs (made, reading from `after` on, if it has
        none); dropped once its last subscriber leaves. The caller has checked that the task
        is `tenant_id`'s (the feed reads within that tenant)."""
        feed = self._feeds.get(task_id)
        if feed is None or feed.channel.closed:
            feed = StoredFeed(tenant_id, task_id, chain_id, RunChannel(first_seq=after + 1))
            self._feeds[task_id] = feed
            self._mark(task_id)
        feed.subscribers += 1
        try:
            yield feed
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0 and self._feeds.get(task_id) is feed:
                del self._feeds[task_id]
                feed.channel.close()

    def stored(self, payload: str) -> None:
        """An `EVENTS` notice (`task_id:last_seq` pairs): feeds behind it are read."""
        for task_id, seq in stored_events(payload):
            feed = self._feeds.get(task_id)
            if feed is not None and (seq is None or seq > feed.channel.last_seq):
                self._mark(task_id)

    def missed(self) -> None:
        """Notices may have been lost: every feed is read."""
        for task_id in self._feeds:
            self._mark(task_id)

    def live_here(self, task_id: UUID) -> None:
        """A run of the task became live in this process: its subscribers follow that."""
        feed = self._feeds.pop(task_id, None)
        if feed is not None:
            feed.channel.close()

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait([self._reader])
            self._reader = None
        for feed in self._feeds.values():
            feed.channel.close()
        self._feeds.clear()

    def _mark(self, task_id: UUID) -> None:
        self._dirty.add(task_id)
        self._wake.set()
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="stored-feeds")

    async def _read(self) -> None:
        while True:
            if not self._dirty:
                self._wake.clear()
                try:
                    async with asyncio.timeout(self._idle_s if self._feeds else None):
                        await self._wake.wait()
                except TimeoutError:
                    await self._check_finished()
                    self.missed()
                continue
            dirty, self._dirty = self._dirty, set()
            feeds = [self._feeds[t] for t in dirty if t in self._feeds]
            try:
                await self._read_once(feeds)
            except Exception as exc:
                self._dirty |= {feed.task_id for feed in feeds}
                if not is_transient(exc):
                    logger.exception("reading followed streams failed; trying again")
                    await asyncio.sleep(1.0)
                    continue
                logger.warning(
                    "reading followed streams failed (%s); waiting for the store", describe(exc)
                )
                self._gate.failed()
                await self._gate.wait_open()

    async def _read_once(self, feeds: list[StoredFeed]) -> None:
        reads = [
            StreamRead(feed.tenant_id, feed.task_id, feed.chain_id, feed.channel.last_seq)
            for feed in feeds
        ]
        pages, full = await self._streams.replay_many(reads, limit=READ_PAGE)
        for feed in feeds:
            page = pages.get(feed.task_id)
            if not page or feed.channel.closed:
                continue
            last = feed.channel.last_seq
            events = [stream_event(feed.task_id, feed.chain_id, item) for item in page]
            events = [event for event in events if event.seq > last]
            if events and events[0].seq != last + 1:
                # Not a stream this feed can follow (events missing from the store): its
                # subscribers read on from the store themselves.
                logger.error(
                    "task %s's stored stream skips from %d to %d", feed.task_id, last, events[0].seq
                )
                self._drop(feed)
                continue
            feed.channel.publish(events)
            if any(_ends(event) for event in events):
                self._drop(feed)
        if full:
            self._dirty |= {feed.task_id for feed in feeds if not feed.channel.closed}

    async def _check_finished(self) -> None:
        """Feeds of tasks that finished with nothing more to read end (erased, say)."""
        for feed in list(self._feeds.values()):
            task = await self._queue.task(feed.task_id)
            finished = task is None or task.tenant_id != feed.tenant_id or task.is_finished
            if finished and (task is None or task.last_seq <= feed.channel.last_seq):
                feed.finished = True
                self._drop(feed)

    def _drop(self, feed: StoredFeed) -> None:
        feed.channel.close()
        if self._feeds.get(feed.task_id) is feed:
            del self._feeds[feed.task_id]


def _ends(event: StreamEvent) -> bool:
    """The task's own `done` (its sub-agents' never enter its stream)."""
    return event.type == DONE and event.relay is None
