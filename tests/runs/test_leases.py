"""Runner leases: the runs of a dead runner are ended `interrupted`; a live one's are not."""

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from app.chain.models import utc_now
from app.runs import RunManager
from app.storage import Database
from app.storage.run_log import RunLog, RunnerLease
from app.storage.tasks import TaskRepository
from tests.factories import stored_task


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


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


async def _status(database: Database, tenant: str, task_id: UUID) -> tuple[str, str | None]:
    async with database.read() as connection:
        task = await TaskRepository(connection, tenant).get(task_id)
    assert task is not None
    return task.status, task.error_code


async def test_a_restarted_server_ends_the_runs_of_its_dead_predecessor_at_once(
    database: Database, log: RunLog, tenant: str
) -> None:
    dead = await _runner(log, socket.gethostname(), await _dead_pid())
    task_id = await _running_task(log, dead, tenant)
    manager = RunManager(log, heartbeat_s=3600)
    await manager.start()
    try:
        assert await _status(database, tenant, task_id) == ("failed", "interrupted")
    finally:
        await manager.stop(grace_s=1)


async def test_a_live_runner_keeps_its_runs_until_its_lease_lapses(
    database: Database, log: RunLog, tenant: str
) -> None:
    elsewhere = await _runner(log, "another-host", 4242)
    alive_here = await _runner(log, socket.gethostname(), os.getppid())
    remote_task = await _running_task(log, elsewhere, tenant)
    local_task = await _running_task(log, alive_here, tenant)
    manager = RunManager(log, heartbeat_s=3600)
    await manager.start()
    try:
        assert await _status(database, tenant, remote_task) == ("working", None)
        assert await _status(database, tenant, local_task) == ("working", None)
        later = utc_now() + timedelta(seconds=manager.lease_s + 1)
        await log.renew_lease(alive_here.id, later)
        orphans = await log.orphans(manager.lease, lease_s=manager.lease_s, now=later)
        assert [task.id for task in orphans if task.tenant_id == tenant] == [remote_task]
    finally:
        await manager.stop(grace_s=1)


async def test_a_stopped_server_gives_up_its_lease(log: RunLog) -> None:
    manager = RunManager(log, heartbeat_s=3600)
    await manager.start()
    assert manager.runner_id in {row.id for row in await log.runners()}
    await manager.stop(grace_s=1)
    assert manager.runner_id not in {row.id for row in await log.runners()}


async def test_a_process_ends_its_own_run_whose_end_could_not_be_stored(
    database: Database, log: RunLog, tenant: str
) -> None:
    """A task this very process owns but no longer runs (the writer could not store its end)
    is ended by the process's next recovery, its lease notwithstanding."""
    manager = RunManager(log, heartbeat_s=3600)
    await manager.start()
    try:
        task_id = await _running_task(log, manager.lease, tenant)
        assert await _status(database, tenant, task_id) == ("working", None)
        assert await manager.recover() >= 1
        assert await _status(database, tenant, task_id) == ("failed", "internal_error")
        async with database.read() as connection:
            task = await TaskRepository(connection, tenant).get(task_id)
        assert task is not None
        assert task.last_seq == 4  # chain_failed and done after the 2 stored events
    finally:
        await manager.stop(grace_s=1)
