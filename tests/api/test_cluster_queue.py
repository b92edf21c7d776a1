"""The shared queue under a burst: two instances with room for 8 runs each take 200 tasks of
two tenants submitted at once, run them all, never past their room, and the tenant with few
tasks is not starved by the one with many."""

import asyncio
import statistics
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from uuid import UUID

import httpx
import pytest

from app.security import mint_token
from tests.api.helpers import stream, submit
from tests.cluster import Instance, cluster, create_tenant, task_rows
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import JWT_SECRET, MODEL
from tests.sse import SSE

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)

ROOM = 8  # OMNIFORGE_MAX_CONCURRENT_RUNS of each instance
BIG, SMALL = 180, 20  # tasks of each tenant
ANSWER_DELAY_S = 0.5  # each run's one LLM call: long enough for the queue to build up
SUBMITTING_AT_ONCE = 20  # submissions in flight at once
# Starts of the big tenant's waiting tasks the small tenant's last task may wait for.
STARVATION_BOUND = 2 * SMALL


def client(instance: Instance, token: str) -> httpx.AsyncClient:
    """A client that holds a stream open for every task at once (httpx pools 100)."""
    return httpx.AsyncClient(
        base_url=instance.base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
    )


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans open at one instant (each [start, end))."""
    return max(sum(1 for s, f in spans if s <= start < f) for start, _ in spans)


def name_of(runner_id: str, instances: tuple[Instance, ...]) -> str:
    """The instance a runner id (host:pid:random) belongs to."""
    pid = int(runner_id.split(":")[1])
    return next(i.name for i in instances if i.process is not None and i.process.pid == pid)


def seconds(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s"


async def test_a_burst_of_two_tenants_is_run_by_both_instances_within_room_and_fairly(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """200 tasks, 180 of a big tenant then 20 of a small one (queued last: its worst case),
    are submitted at once, in turn to A and B: both accept and run tasks of both tenants,
    each taking what fits in its room as it accepts it and the rest from the queue. (Through
    A alone the submissions came slower than runs ended: the big tenant's backlog was gone
    before the small tenant's tasks arrived.) Each run is one LLM call of 0.5 s. Asserted:
    all complete, each run by one instance without a resume; each instance was full and
    never ran more than 8 at once (its tasks' stored [started_at, finished_at)).

    Starvation, measured in starts: of the big tenant's tasks already waiting when the small
    tenant's last task was queued (its `created_at`), at most 2 x 20 start before that task
    starts (`started_at`, stored when its run begins). The claim order (a tenant's running
    plus waiting-before count, then age) gives the small tenant every free room until it runs
    as many as the big one, then each tenant the room its own runs free, so it waits for far
    fewer. First come, first served would start every one of them first: there are asserted
    to be more than 2 x 20 (the queue really built up)."""
    fake_llm.always(MODEL, Reply.text("done", delay_s=ANSWER_DELAY_S))
    async with cluster(
        own_database_url, tmp_path, fake_llm, OMNIFORGE_MAX_CONCURRENT_RUNS=str(ROOM)
    ) as group:
        small = await create_tenant(own_database_url)
        small_token = mint_token(JWT_SECRET, tenant_id=small, subject="bob", roles=("member",))
        a = await group.instance("a")
        b = await group.instance("b")
        clients = {
            (tenant, instance.name): client(instance, token)
            for tenant, token in ((group.tenant, group.token), (small, small_token))
            for instance in (a, b)
        }
        order = [group.tenant] * BIG + [small] * SMALL
        submitting = asyncio.Semaphore(SUBMITTING_AT_ONCE)

        async def run(index: int, tenant: str) -> tuple[str, list[SSE]]:
            on = clients[(tenant, "a" if index % 2 == 0 else "b")]
            async with submitting:
                task_id: str = (await submit(on))["task_id"]
            return task_id, await stream(on, task_id)

        began = time.perf_counter()
        try:
            ended = await asyncio.wait_for(
                asyncio.gather(*(run(i, tenant) for i, tenant in enumerate(order))), 120
            )
        finally:
            for open_client in clients.values():
                await open_client.aclose()
        wall_s = time.perf_counter() - began

    finals = Counter(events[-1].json["final_state"] for _, events in ended)
    assert finals == {"completed": BIG + SMALL}, finals
    big_rows = await task_rows(own_database_url, group.tenant)
    small_rows = await task_rows(own_database_url, small)
    rows = big_rows + small_rows
    assert {row.id for row in rows} == {UUID(task_id) for task_id, _ in ended}
    assert Counter(row.status for row in rows) == {"completed": BIG + SMALL}
    assert all(row.resumes == 0 for row in rows), "no run was handed over or resumed"

    runners = Counter(name_of(row.runner_id, (a, b)) for row in rows)
    assert runners.keys() == {"a", "b"}, f"both instances ran some: {runners}"
    at_once = {
        name: most_at_once(
            [(r.started_at, r.finished_at) for r in rows if name_of(r.runner_id, (a, b)) == name]
        )
        for name in sorted(runners)
    }
    last_small = max(small_rows, key=lambda r: r.started_at)
    queued = max(r.created_at for r in small_rows)  # the small tenant's last submission
    waiting = [r for r in big_rows if r.created_at < queued and r.started_at > queued]
    ahead = [r for r in waiting if r.started_at < last_small.started_at]
    starts = sorted(rows, key=lambda r: r.started_at)
    rank = starts.index(last_small) + 1
    waits = {
        name: [(r.started_at - r.created_at).total_seconds() for r in tenant_rows]
        for name, tenant_rows in (("big", big_rows), ("small", small_rows))
    }
    print(
        f"\nqueue: {BIG + SMALL} tasks in {wall_s:.1f} s; runs per instance "
        f"{dict(sorted(runners.items()))}; most at once per instance {at_once}\n"
        f"small tenant's last task: start {rank} of {len(starts)}; big tenant's tasks waiting "
        f"when it was queued: {len(waiting)}, of which started before it: {len(ahead)} "
        f"(bound {STARVATION_BOUND})\n"
        f"queue wait: big {seconds(waits['big'])}; small {seconds(waits['small'])}"
    )
    assert max(at_once.values()) <= ROOM, f"never more than {ROOM} at once: {at_once}"
    assert min(at_once.values()) == ROOM, f"each instance was full: {at_once}"
    assert len(waiting) > STARVATION_BOUND, "the queue built up: first come would starve"
    assert len(ahead) <= STARVATION_BOUND, "the small tenant waited behind the big one's queue"
