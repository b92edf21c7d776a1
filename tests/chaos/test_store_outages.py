"""The database stopped the hard way (`pg_ctl -m immediate`) under load, for 10 s, 40 s and
200 s — three fleets side by side, each on a database of its own — under two instances whose
heartbeats differ (the default 10 s and 2 s: leases of 30 s and 6 s, longer and shorter than
the outages): runs pause through every outage — no model call starts while it lasts — and go
on when the database is back. No task runs twice, no call is repeated, no task fails, no live
instance's registration disappears or is given up, no request is answered 500; submissions
made during an outage land after it (503s with Retry-After meanwhile). Then two instances with
one hostname and one pid (separate PID namespaces, as containers on host networking) run a
burst side by side: neither takes the other's runs."""

import asyncio
import contextlib
import re
import time
from pathlib import Path

from tests.chaos.fleet import Fleet, fleet
from tests.chaos.followers import Followers, following
from tests.chaos.invariants import Allowances, assert_invariants
from tests.chaos.submit import submit_tasks

TASKS = 20
LATE = 4  # submitted during each outage
OUTAGES_S = (10, 40, 200)
# Calls whose reply comes while the database is down still finish: only new ones must wait.
CALL_S = 2.0
# Requests that may still reach the model this long after the database went away: sent before
# the instances could know (their connection to it is dropped at once: they know within ms).
NOTICE_S = 0.5
_SERVER_ERROR = re.compile(r'" 5\d\d ')


def server_errors(group: Fleet) -> list[str]:
    """Access-log lines of answers 500 and up other than 503."""
    return [
        line
        for instance in group.instances.values()
        for line in instance.output
        if _SERVER_ERROR.search(line) and '" 503 ' not in line
    ]


async def assert_leases_kept(group: Fleet) -> None:
    """Every live instance's registration is there and was never given up."""
    rows = await group.runners()
    assert len(rows) == len(group.live()), rows
    assert all(row.released_at is None for row in rows), f"a lease was given up: {rows}"


async def test_database_outages_pause_runs_and_lose_or_repeat_nothing(tmp_path: Path) -> None:
    """The three outages at once, each on a fleet and a database of its own."""
    # Migrations go one at a time: Alembic keeps its context in the process, not per call.
    migrating = asyncio.Lock()
    async with asyncio.TaskGroup() as group:
        for outage_s in OUTAGES_S:
            directory = tmp_path / f"outage-{outage_s}s"
            directory.mkdir()
            group.create_task(outage_round(directory, outage_s, migrating))


async def outage_round(directory: Path, outage_s: float, migrating: asyncio.Lock) -> None:
    """A fleet under load; its database stopped for `outage_s`; submissions during it."""
    async with contextlib.AsyncExitStack() as stack:
        async with migrating:
            group = await stack.enter_async_context(fleet(directory, llm_delay_s=CALL_S))
        llm = group.llm
        await group.start("a")  # the default heartbeat: a 30 s lease
        await group.start("b", OMNIFORGE_RUNNER_HEARTBEAT_S="2")  # a 6 s lease
        submitted = await submit_tasks(group, range(TASKS))
        async with following(group, submitted, deadline_s=outage_s + 120) as followers:
            await group.changes.wait_for(
                lambda: all(llm.calls_for(task.marker) for task in submitted),
                timeout_s=30,
                what="every task in its first model call",
            )
            await group.postgres.stop()
            down_at = time.monotonic()
            late = asyncio.ensure_future(
                submit_tasks(group, range(TASKS, TASKS + LATE), deadline_s=outage_s + 60)
            )
            await asyncio.sleep(outage_s)  # the outage itself
            started_meanwhile = [
                call for call in llm.calls if down_at + NOTICE_S < call.received_at
            ]
            await group.postgres.start()
            await followers.until_done()
        assert started_meanwhile == [], f"model calls started during the {outage_s} s outage"
        landed = await late
        async with following(group, landed, deadline_s=60) as late_followers:
            await late_followers.until_done()
        every = Followers(followers.by_marker | late_followers.by_marker)
        await assert_invariants(group, [*submitted, *landed], every, Allowances())
        assert llm.repeated() == {}, f"calls made twice after the {outage_s} s outage"
        await assert_leases_kept(group)
        assert server_errors(group) == []


async def test_two_instances_with_one_hostname_and_one_pid_keep_to_their_own_runs(
    tmp_path: Path,
) -> None:
    async with fleet(tmp_path, llm_delay_s=1.0, OMNIFORGE_RUNNER_HEARTBEAT_S="0.5") as group:
        await group.start_all("a", "b", namespaced=True)
        rows = await group.runners()
        assert len({(row.hostname, row.pid) for row in rows}) == 1, "one hostname, one pid"
        submitted = await submit_tasks(group, range(TASKS))
        async with following(group, submitted, deadline_s=60) as followers:
            await followers.until_done()
        await assert_invariants(group, submitted, followers, Allowances())
        assert group.llm.repeated() == {}
        await assert_leases_kept(group)
        assert server_errors(group) == []
