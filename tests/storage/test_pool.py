"""The Postgres pool keeps what a burst opened: once warm, bursts of transactions up to its size
reuse its connections instead of opening (and a backend starting) for each burst, and a
quiet spell keeps to the connection that served last."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text

from app.storage import Database
from tests.conftest import fresh_database

POOL_SIZE = 3
# The most a burst holds at once: the pool's kept connections and as many again.
BURST = 2 * POOL_SIZE


@pytest.fixture
async def postgres_url(tmp_path: Path) -> AsyncIterator[str]:
    async with fresh_database("postgres", tmp_path) as url:
        yield url


async def _burst(database: Database, size: int) -> None:
    """`size` transactions open at once, then all closed."""
    holding = 0
    all_held, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        nonlocal holding
        async with database.transaction() as connection:
            await connection.execute(text("SELECT 1"))
            holding += 1
            if holding == size:
                all_held.set()
            await release.wait()

    holders = [asyncio.ensure_future(hold()) for _ in range(size)]
    await all_held.wait()
    release.set()
    await asyncio.gather(*holders)


async def test_bursts_reuse_the_connections_the_first_burst_opened(postgres_url: str) -> None:
    database = Database(postgres_url, pool_size=POOL_SIZE)
    opened: list[object] = []
    event.listen(database.engine.sync_engine, "connect", lambda connection, _: opened.append(1))
    try:
        for _ in range(3):
            await _burst(database, BURST)
        assert len(opened) == BURST, f"{len(opened)} connections opened for 3 bursts of {BURST}"
    finally:
        await database.dispose()


async def test_after_a_burst_one_caller_at_a_time_is_served_by_the_last_connection_returned(
    postgres_url: str,
) -> None:
    """A single client after a burst keeps to one warm connection (and its server backend)
    instead of going round every connection the burst opened."""
    database = Database(postgres_url, pool_size=POOL_SIZE)
    try:
        await _burst(database, BURST)
        backends = set()
        for _ in range(3 * BURST):
            async with database.read() as connection:
                backends.add(await connection.scalar(text("SELECT pg_backend_pid()")))
        assert len(backends) == 1, f"{len(backends)} backends served one caller in turn"
    finally:
        await database.dispose()
