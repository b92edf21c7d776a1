"""Runner leases and the queue: the runs of a dead runner go back to the queue (to be resumed
by whoever claims them); a live one's stay its own; claims are fair between tenants."""

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from app.chain import TaskState
from app.chain.models import utc_now
from app.runs import RunManager
from app.runs.leases import LeaseKeeper
from app.storage import Database
from app.storage.run_log import RunLog, RunnerLease
from app.storage.tasks import TaskRepository
from tests.factories import stored_task


@pytest.fixture
async def database(own_database_url: str) -> AsyncIterator[Database]:
    """A database of this test's own: no running service claims from its queue."""
    database = Database(own_database_url)
    yield database
    await database.dispose()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid4().hex[:12]}"


@pytest.fixture
def log(database: Database) -> RunLog:
    return RunLog(database)


async def _dead_pid() -> int:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await process.wait()
    return process.pid


async def _runner(log: RunLog, hostname: str, pid: int) -> RunnerLease:
    lease = RunnerLease(f"{hostname}:{pid}:{uuid4().hex[:8]}", hostname, pid, utc_now())
    await log.register_runner(lease)
    return lease


async def _running_task(log: RunLog, runner: RunnerLease, tenant: str) -> UUID:
    task_id, _ = await stored_task(log, tenant, runner_id=runner.id, last_seq=2)
    return task_id


async def _owner(database: Database, tenant: str, task_id: UUID) -> tuple[str, str | None]:
    async with database.read() as connection:
        task = await TaskRepository(connection, tenant).get(task_id)
    assert task is not None
    return task.status, task.runner_id


async def test_a_restarted_server_takes_back_the_runs_of_its_dead_predecessor_at_once(
    database: Database, log: RunLog, tenant: str
) -> None:
    """Same host, its process gone: no lease wait. The run goes back to the queue, still
    `working` (to be resumed), and a claim takes it."""
    dead = await _runner(log, socket.gethostname(), await _dead_pid())
    task_id = await _running_task(log, dead, tenant)
    me = await _runner(log, socket.gethostname(), os.getpid())
    released = await log.release_orphans(me, lease_s=3600, now=utc_now())
    assert released >= 1
    assert await _owner(database, tenant, task_id) == ("working", None)
    assert dead.id not in {row.id for row in await log.runners()}
    claimed = await log.claim(me.id, 1000)
    assert task_id in {task.id for task in claimed}
    assert await _owner(database, tenant, task_id) == ("working", me.id)


async def test_a_live_runner_keeps_its_runs_until_its_lease_lapses(
    database: Database, log: RunLog, tenant: str
) -> None:
    elsewhere = await _runner(log, "another-host", 4242)
    alive_here = await _runner(log, socket.gethostname(), os.getppid())
    remote_task = await _running_task(log, elsewhere, tenant)
    local_task = await _running_task(log, alive_here, tenant)
    me = await _runner(log, socket.gethostname(), os.getpid())
    await log.release_orphans(me, lease_s=30, now=utc_now())
    assert await _owner(database, tenant, remote_task) == ("working", elsewhere.id)
    assert await _owner(database, tenant, local_task) == ("working", alive_here.id)
    later = utc_now() + timedelta(seconds=31)
    await log.renew_lease(alive_here.id, later)
    await log.renew_lease(me.id, later)
    await log.release_orphans(me, lease_s=30, now=later)
    assert await _owner(database, tenant, remote_task) == ("working", None)
    assert await _owner(database, tenant, local_task) == ("working", alive_here.id)


async def test_a_stopped_server_gives_up_its_lease(log: RunLog) -> None:
    manager = RunManager(log, heartbeat_s=3600)
    await manager.start()
    assert manager.runner_id in {row.id for row in await log.runners()}
    await manager.stop(grace_s=1)
    assert manager.runner_id not in {row.id for row in await log.runners()}


async def test_a_process_gives_back_its_own_run_that_is_not_live_in_it(
    database: Database, log: RunLog, tenant: str
) -> None:
    """A task this very process owns but no longer runs (the writer could not store its end)
    goes back to the queue at the process's next recovery, its lease notwithstanding."""
    keeper = LeaseKeeper(log, heartbeat_s=3600, holds=lambda _: False)
    task_id = await _running_task(log, keeper.lease, tenant)
    assert await _owner(database, tenant, task_id) == ("working", keeper.runner_id)
    assert await keeper.recover() >= 1
    assert await _owner(database, tenant, task_id) == ("working", None)


async def test_claims_interleave_tenants_and_take_each_task_once(log: RunLog, tenant: str) -> None:
    """A tenant's burst does not starve another's: every tenant's first waiting task comes
    before any tenant's second, then by age. Two claimers never get the same task."""
    other = f"{tenant}-b"
    start = datetime.now(UTC)
    burst = [
        (
            await stored_task(
                log, tenant, status=TaskState.SUBMITTED, created_at=start + timedelta(seconds=i)
            )
        )[0]
        for i in range(6)
    ]
    late = [
        (
            await stored_task(
                log, other, status=TaskState.SUBMITTED, created_at=start + timedelta(seconds=10 + i)
            )
        )[0]
        for i in range(2)
    ]
    mine = {*burst, *late}
    first = [t.id for t in await log.claim("one", 4) if t.id in mine]
    assert first == [burst[0], late[0], burst[1], late[1]]
    rest, again = await asyncio.gather(log.claim("two", 3), log.claim("three", 3))
    taken = [t.id for t in [*rest, *again] if t.id in mine]
    assert sorted(taken) == sorted(burst[2:])
    assert len(set(taken)) == len(taken)
