"""Streams of a task run elsewhere are read once per notice for all their subscribers in this
process, not once per subscriber: a hundred followers of two tasks cost one read of the store
per burst of notices, and each follower gets every event, in order."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID, uuid4

import pytest
from sqlalchemy import event

from app.chain import TaskState
from app.runs.channel import StreamEvent
from app.runs.feeds import StoredFeed, StoredFeeds
from app.runs.outage import StoreGate
from app.storage import Database
from app.storage.notify import EVENTS, notices_for
from app.storage.runs import Fence, RunStores, RunWrite
from app.storage.types import RawJSON
from tests.factories import stored_task

FOLLOWERS = 50


@pytest.fixture
async def stores(own_database_url: str) -> AsyncIterator[RunStores]:
    database = Database(own_database_url)
    stores = RunStores.of(database, notices_for(database))
    await stores.notices.start()
    yield stores
    await stores.notices.aclose()
    await database.dispose()


def _events(task_id: UUID, tenant: str, first: int, count: int) -> list[Any]:
    return [
        {
            "task_id": task_id,
            "seq": seq,
            "tenant_id": tenant,
            "type": "task_status",
            "data": RawJSON(f'{{"n":{seq}}}'),
        }
        for seq in range(first, first + count)
    ]


async def test_a_hundred_followers_of_tasks_run_elsewhere_share_one_read_per_notice(
    stores: RunStores,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    runs = [
        await stored_task(stores.queue, tenant, status=TaskState.WORKING, runner_id="elsewhere")
        for _ in range(2)
    ]
    reads: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "task_events" in statement and statement.lstrip().upper().startswith("SELECT"):
            reads.append(statement)

    event.listen(stores.database.engine.sync_engine, "before_cursor_execute", count)
    feeds = StoredFeeds(stores.streams, stores.queue, StoreGate())
    stores.notices.listen(EVENTS, feeds.stored)
    received: dict[tuple[UUID, int], list[int]] = {}

    async def follow(feed: StoredFeed, index: int) -> None:
        got = received.setdefault((feed.task_id, index), [])
        async for item in feed.channel.follow(0):
            assert isinstance(item, StreamEvent)
            got.append(item.seq)
            if len(got) == 6:
                return

    with contextlib.ExitStack() as joined:
        feeds_joined = [
            joined.enter_context(feeds.joined(tenant, task_id, chain_id, 0))
            for task_id, chain_id in runs
            for _ in range(FOLLOWERS)
        ]
        assert len(feeds) == 2  # one per task, whatever the number of its followers
        following = [
            asyncio.ensure_future(follow(feed, index)) for index, feed in enumerate(feeds_joined)
        ]
        before = len(reads)
        for batch in range(3):  # three group writes of both tasks, each announced once
            writes = [
                RunWrite(
                    task_id,
                    chain_id,
                    Fence("elsewhere", 1),
                    batch * 2,
                    batch * 2 + 2,
                    events=_events(task_id, tenant, batch * 2 + 1, 2),
                )
                for task_id, chain_id in runs
            ]
            assert await stores.writes.append(writes) == set()
        async with asyncio.timeout(15):
            await asyncio.gather(*following)

    assert all(seqs == [1, 2, 3, 4, 5, 6] for seqs in received.values())
    assert len(received) == 2 * FOLLOWERS
    # One read as the feeds are made, then at most one per notice (three), whatever the
    # number of followers (a burst of notices during a read shares the next one).
    assert 1 <= len(reads) - before <= 4, reads
    await feeds.aclose()
