from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from tests.governance.windows import REDIS_URL, Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A key prefix of the shared Redis for this test alone; its keys are deleted after."""
    prefix = f"omniforge-test:{uuid4().hex[:12]}:"
    yield prefix
    client = Redis.from_url(REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}*"):
            await client.delete(key)
    finally:
        await client.aclose()
