"""Runner leases, claims and fences on a real database: liveness is judged by lease time
alone, by a runner that kept its own lease for at least the other's lease; a lapsed runner's
registration is kept (marked released) and its renewal then fails; every claim takes the next
ownership epoch and a write of an older claim is refused whole at the database; claims are
fair between tenants, skip tasks held back after a failure, and a released runner claims
nothing."""

import asyncio
import socket
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from sqlalchemy import func, select, update

from app.agents import AgentRuntime, RuntimeSettings
from app.chain import TaskState
from app.chain.models import utc_now
from app.config import Settings
from app.runs import RunManager
from app.runs.leases import LeaseKeeper
from app.storage import Database
from app.storage.runs import Fence, RunnerLease, RunStores, RunWrite
from app.storage.runs.queue import backoff_s
from app.storage.tables import cost_records, runners, task_events, tasks
from app.storage.tasks import TaskRepository
from app.storage.types import RawJSON
from tests.factories import stored_task
from tests.storage.hand_offs import HandOffs


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid4().hex[:12]}"


@pytest.fixture
def stores(database: Database) -> RunStores:
    return RunStores.of(database)


async def _runner(stores: RunStores, lease_s: float = 30.0, *, pid: int = 1) -> RunnerLease:
    """A runner as a process in a container registers: same hostname, maybe the same pid."""
    lease = RunnerLease(f"r-{uuid4().hex[:8]}", socket.gethostname(), pid, utc_now(), lease_s)
    await stores.runners.register(lease)
    return lease


async def _silent_for(database: Database, runner: RunnerLease, seconds: float) -> None:
    """The runner's last renewal was `seconds` ago (by the database's clock)."""
    async with database.transaction() as connection:
        now = datetime.now(UTC)
        await connection.execute(
            update(runners)
            .where(runners.c.id == runner.id)
            .values(heartbeat_at=now - timedelta(seconds=seconds))
        )


async def _owner(database: Database, tenant: str, task_id: UUID) -> tuple[str, str | None]:
    async with database.read() as connection:
        task = await TaskRepository(connection, tenant).get(task_id)
    assert task is not None
    return task.status, task.runner_id


async def _released_at(database: Database, runner: RunnerLease) -> datetime | None:
    async with database.read() as connection:
        row = (await connection.execute(select(runners).where(runners.c.id == runner.id))).one()
    released: datetime | None = row.released_at
    return released


async def test_a_lapsed_runner_is_released_by_one_that_kept_its_lease_as_long_and_learns_it(
    database: Database, stores: RunStores, tenant: str
) -> None:
    gone = await _runner(stores, lease_s=10)
    task_id, _ = await stored_task(stores.queue, tenant, runner_id=gone.id, last_seq=2)
    me = await _runner(stores)
    await _silent_for(database, gone, 11)

    # A judge that has not itself kept its lease for the other's whole lease judges nobody:
    # after an outage every runner was silent alike.
    assert await stores.runners.release_lapsed(me.id, judged_over_s=9.9) == 0
    assert await _owner(database, tenant, task_id) == ("working", gone.id)

    assert await stores.runners.release_lapsed(me.id, judged_over_s=10) >= 1
    assert await _owner(database, tenant, task_id) == ("working", None)
    # Its registration is kept, marked: its next renewal fails, and it knows.
    assert await _released_at(database, gone) is not None
    assert await stores.runners.renew(gone.id) is False
    assert await stores.runners.renew(me.id) is True
    # Registering again takes the registration back.
    await stores.runners.register(gone)
    assert await _released_at(database, gone) is None
    assert await stores.runners.renew(gone.id) is True


async def test_a_runner_that_renewed_keeps_its_runs_whatever_its_host_and_pid(
    database: Database, stores: RunStores, tenant: str
) -> None:
    """Two containers with one hostname in different PID namespaces: each may be pid 1. No
    process check decides anything; the lease alone does."""
    other = await _runner(stores, lease_s=10, pid=1)
    task_id, _ = await stored_task(stores.queue, tenant, runner_id=other.id)
    me = await _runner(stores, lease_s=10, pid=1)
    await _silent_for(database, other, 9)
    await stores.runners.release_lapsed(me.id, judged_over_s=3600)
    assert await _owner(database, tenant, task_id) == ("working", other.id)
    assert await _released_at(database, other) is None


async def test_the_runs_of_an_unregistered_or_released_runner_go_back_at_once(
    database: Database, stores: RunStores, tenant: str
) -> None:
    task_id, _ = await stored_task(stores.queue, tenant, runner_id="never-registered")
    me = await _runner(stores)
    released = await stores.runners.release_lapsed(me.id, judged_over_s=0)
    assert released >= 1
    assert await _owner(database, tenant, task_id) == ("working", None)
    claimed = await stores.queue.claim(me.id, 1000)
    assert task_id in {task.id for task in claimed}
    assert await _owner(database, tenant, task_id) == ("working", me.id)


async def test_a_write_of_an_older_claim_is_refused_whole_and_a_retried_one_is_not_doubled(
    database: Database, stores: RunStores, tenant: str
) -> None:
    first, second = await _runner(stores), await _runner(stores)
    task_id, chain_id = await stored_task(stores.queue, tenant, status=TaskState.SUBMITTED)
    [claimed] = [t for t in await stores.queue.claim(first.id, 1000) if t.id == task_id]
    assert claimed.owner_epoch == 1
    old = Fence(first.id, claimed.owner_epoch)

    def write(fence: Fence, after: int) -> RunWrite:
        row = {
            "task_id": task_id,
            "seq": after + 1,
            "tenant_id": tenant,
            "type": "task_status",
            "data": RawJSON('{"state":"working"}'),
        }
        cost = {
            "tenant_id": tenant,
            "user_id": "u",
            "task_id": task_id,
            "chain_id": chain_id,
            "step_id": uuid4(),
            "correlation_id": uuid4(),
            "tool_name": "llm",
            "tool_type": "llm",
            "model": "demo",
            "deployment": None,
            "provider": None,
            "input_tokens": 1,
            "output_tokens": 1,
            "cost_usd": None,
            "unpriced": True,
            "recorded_at": utc_now(),
        }
        return RunWrite(task_id, chain_id, fence, after, after + 1, events=[row], costs=[cost])  # type: ignore[list-item]

    assert await stores.writes.append([write(old, 0)]) == set()
    # Tried again after a commit whose answer was lost: found stored, not stored twice.
    assert await stores.writes.append([write(old, 0)]) == set()
    # The task goes back to the queue and another runner claims it: the next epoch.
    assert await stores.queue.release(first.id, {task_id: old.epoch}) == 1
    [taken] = [t for t in await stores.queue.claim(second.id, 1000) if t.id == task_id]
    assert taken.owner_epoch == 2
    # The first run's next write is refused whole: its event, its cost, its task row.
    assert await stores.writes.append([write(old, 1)]) == {task_id}
    new = Fence(second.id, taken.owner_epoch)
    assert await stores.writes.append([write(new, 1)]) == set()
    async with database.read() as connection:
        events = await connection.scalar(
            select(func.count()).select_from(task_events).where(task_events.c.task_id == task_id)
        )
        costs = await connection.scalar(
            select(func.count()).select_from(cost_records).where(cost_records.c.task_id == task_id)
        )
        last_seq = await connection.scalar(select(tasks.c.last_seq).where(tasks.c.id == task_id))
    assert (events, costs, last_seq) == (2, 2, 2)


async def test_in_one_group_the_write_of_a_lost_claim_is_refused_and_the_others_stored_whole(
    database: Database, stores: RunStores, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = await _runner(stores)
    held, lost = [
        await stored_task(stores.queue, tenant, status=TaskState.SUBMITTED) for _ in range(2)
    ]
    claims = {t.id: t for t in await stores.queue.claim(me.id, 1000)}
    fences = {task_id: Fence(me.id, claims[task_id].owner_epoch) for task_id, _ in (held, lost)}
    # The lost task's claim moved on (given back and taken again): its fence is stale.
    assert await stores.queue.release(me.id, {lost[0]: fences[lost[0]].epoch}) == 1
    assert any(t.id == lost[0] for t in await stores.queue.claim(me.id, 1000))

    def write(task_id: UUID, chain_id: UUID, seq: int = 1) -> RunWrite:
        row = {
            "task_id": task_id,
            "seq": seq,
            "tenant_id": tenant,
            "type": "task_status",
            "data": RawJSON('{"state":"working"}'),
        }
        return RunWrite(task_id, chain_id, fences[task_id], seq - 1, seq, events=[row])  # type: ignore[list-item]

    hand_offs = HandOffs(monkeypatch)
    assert await stores.writes.append([write(*lost), write(*held)]) == {lost[0]}
    if database.is_sqlite:
        # The group in one hand-off to the database's thread, refused; then again task by
        # task, in one; and the read of the refused task's row (stored by an earlier try?).
        assert hand_offs.count == 3
    async with database.read() as connection:
        stored = dict(
            (
                await connection.execute(
                    select(tasks.c.id, tasks.c.last_seq).where(tasks.c.id.in_([held[0], lost[0]]))
                )
            ).all()
        )
        events = await connection.scalar(
            select(func.count()).select_from(task_events).where(task_events.c.task_id == lost[0])
        )
    assert stored == {held[0]: 1, lost[0]: 0}
    assert events == 0
    hand_offs.count = 0
    assert await stores.writes.append([write(*held, seq=2)]) == set()
    if database.is_sqlite:
        assert hand_offs.count == 1


async def test_a_failed_task_is_held_back_longer_each_time_and_a_released_runner_claims_nothing(
    database: Database, stores: RunStores, tenant: str
) -> None:
    me = await _runner(stores)
    task_id, _ = await stored_task(stores.queue, tenant, status=TaskState.SUBMITTED)
    holds = []
    for _ in range(3):
        [task] = [t for t in await stores.queue.claim(me.id, 1000) if t.id == task_id]
        holds.append(await stores.queue.release_failed(me.id, {task_id: task.owner_epoch}))
        assert task_id not in {t.id for t in await stores.queue.claim(me.id, 1000)}
        async with database.transaction() as connection:  # the hold is over
            await connection.execute(
                update(tasks).where(tasks.c.id == task_id).values(claimable_at=utc_now())
            )
    assert holds == [backoff_s(1), backoff_s(2), backoff_s(3)] == [1.0, 2.0, 4.0]
    async with database.read() as connection:
        assert await connection.scalar(select(tasks.c.failures).where(tasks.c.id == task_id)) == 3

    judge = await _runner(stores, lease_s=1)
    await _silent_for(database, me, 3600)
    await stores.runners.release_lapsed(judge.id, judged_over_s=3600)
    assert task_id not in {t.id for t in await stores.queue.claim(me.id, 1000)}
    assert task_id in {t.id for t in await stores.queue.claim(judge.id, 1000)}


async def test_a_stopped_server_gives_up_its_lease(stores: RunStores) -> None:
    runtime = AgentRuntime.build(RuntimeSettings.model_validate(Settings()))
    manager = RunManager(stores, runtime, heartbeat_s=3600)
    await manager.start()
    assert manager.runner_id in {row.id for row in await stores.runners.all()}
    await manager.stop(grace_s=1)
    assert manager.runner_id not in {row.id for row in await stores.runners.all()}


async def test_a_process_gives_back_its_own_run_that_is_not_live_in_it(
    database: Database, stores: RunStores, tenant: str
) -> None:
    """A task this very process holds but no longer runs (the writer could not store its end)
    goes back to the queue at the process's next recovery, its lease notwithstanding."""
    keeper = LeaseKeeper(stores.runners, stores.queue, heartbeat_s=3600, holds=lambda _: False)
    await stores.runners.register(keeper.lease)
    task_id, _ = await stored_task(stores.queue, tenant, runner_id=keeper.runner_id)
    assert await _owner(database, tenant, task_id) == ("working", keeper.runner_id)
    assert await keeper.recover() >= 1
    assert await _owner(database, tenant, task_id) == ("working", None)


async def test_a_keeper_that_finds_its_lease_given_up_stops_its_runs_and_registers_again(
    database: Database, stores: RunStores
) -> None:
    lost: list[str] = []
    keeper = LeaseKeeper(
        stores.runners,
        stores.queue,
        heartbeat_s=3600,
        holds=lambda _: True,
        lost=lambda: lost.append(keeper.runner_id),
    )
    await stores.runners.register(keeper.lease)
    await keeper.renew()
    assert lost == []
    async with database.transaction() as connection:  # judged lapsed, as a judge does
        await connection.execute(
            update(runners).where(runners.c.id == keeper.runner_id).values(released_at=utc_now())
        )
    await keeper.renew()
    assert lost == [keeper.runner_id]
    assert await _released_at(database, keeper.lease) is None
    assert await stores.runners.renew(keeper.runner_id) is True


async def test_claims_interleave_tenants_and_take_each_task_once(
    stores: RunStores, tenant: str
) -> None:
    """A tenant's burst does not starve another's: every tenant's first waiting task comes
    before any tenant's second, then by age. Two claimers never get the same task."""
    other = f"{tenant}-b"
    start = datetime.now(UTC)
    burst = [
        (
            await stored_task(
                stores.queue,
                tenant,
                status=TaskState.SUBMITTED,
                created_at=start + timedelta(seconds=i),
            )
        )[0]
        for i in range(6)
    ]
    late = [
        (
            await stored_task(
                stores.queue,
                other,
                status=TaskState.SUBMITTED,
                created_at=start + timedelta(seconds=10 + i),
            )
        )[0]
        for i in range(2)
    ]
    mine = {*burst, *late}
    one, two, three = await _runner(stores), await _runner(stores), await _runner(stores)
    first = [t.id for t in await stores.queue.claim(one.id, 4) if t.id in mine]
    assert first == [burst[0], late[0], burst[1], late[1]]
    rest, again = await asyncio.gather(
        stores.queue.claim(two.id, 3), stores.queue.claim(three.id, 3)
    )
    taken = [t.id for t in [*rest, *again] if t.id in mine]
    assert sorted(taken) == sorted(burst[2:])
    assert len(set(taken)) == len(taken)
