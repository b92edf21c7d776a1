"""A task's stream for one subscriber: what it missed, from the store, then live events."""

from collections.abc import AsyncIterator
from uuid import UUID

from app.runs.channel import StreamEvent
from app.runs.manager import RunManager
from app.runs.recorder import stream_event
from app.storage.run_log import RunLog

REPLAY_PAGE = 500


async def task_stream(
    manager: RunManager,
    log: RunLog,
    task_id: UUID,
    tenant_id: str,
    chain_id: UUID,
    *,
    after: int,
    keepalive_s: float | None,
) -> AsyncIterator[StreamEvent | None]:
    """Every event with `seq > after`, in order, with no gap and no duplicate; `None` for a
    keep-alive. Ends after `done`, or, for a run that is not live here, after what is stored.

    A live run's channel holds every event it has published, and publishes only what is
    stored, so a subscriber that finds the channel needs nothing from the store; one that does
    not find it is looking at a run whose every event is already stored.
    """
    channel = manager.channel(task_id)
    if channel is not None:
        async for event in channel.follow(after, keepalive_s=keepalive_s):
            yield event
        return
    while True:
        page = await log.replay(tenant_id, task_id, chain_id, after=after, limit=REPLAY_PAGE)
        for stored in page:
            yield stream_event(task_id, chain_id, stored)
        if len(page) < REPLAY_PAGE:
            return
        after = page[-1].seq
