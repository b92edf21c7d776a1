"""The fleet itself: instances in PID namespaces of their own run tasks like any other while
sharing the hostname and the pid, and stop, die and come back as a scenario asks."""

import socket
from pathlib import Path

import httpx

from tests.chaos.fleet import fleet, is_live
from tests.chaos.followers import following
from tests.chaos.invariants import assert_invariants
from tests.chaos.submit import submit_tasks


async def test_namespaced_instances_share_hostname_and_pid_and_stop_die_and_restart(
    tmp_path: Path,
) -> None:
    async with fleet(tmp_path, llm_delay_s=0.1) as group:
        a, b = await group.start_all("a", "b", namespaced=True)
        leases = await group.runners()
        assert sorted((row.hostname, row.pid) for row in leases) == [(socket.gethostname(), 1)] * 2
        submitted = await submit_tasks(group, range(4))
        assert {task.instance for task in submitted} == {"a", "b"}
        async with following(group, submitted, deadline_s=30) as followers:
            await followers.until_done()
        await assert_invariants(group, submitted, followers)

        await group.terminate("a")
        assert not is_live(a)
        assert "Application shutdown complete" in a.log
        await group.kill("b")
        assert group.live() == []
        again = await group.restart("b")
        assert group.live() == [again]
        assert again.port == b.port
        async with httpx.AsyncClient(base_url=again.base_url) as client:
            assert (await client.get("/healthz")).status_code == 200
