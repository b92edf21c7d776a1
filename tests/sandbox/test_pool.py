"""The process's live sandboxes: one per key and owner, restored from a snapshot when started,
stopped when idle, the least recently used making room at the limit, and nothing of a stopped
sandbox left running under its user."""

import asyncio
from collections.abc import Callable

import pytest

from app.sandbox import SandboxesBusy, SandboxHost, SandboxLimits, SandboxPool
from tests.sandbox.conftest import free_uid, processes_of

LIMITS = SandboxLimits(wall_s=10)


@pytest.fixture
def pool_host(host: SandboxHost) -> SandboxHost:
    """The host with a range of users of this test's own."""
    return SandboxHost(packages=host.packages, first_uid=free_uid(), uids=8)


async def test_a_key_keeps_its_sandbox_and_an_owner_never_gets_anothers(
    pool_host: SandboxHost,
) -> None:
    pool = SandboxPool(pool_host)
    try:
        first, started = await pool.get("w1", LIMITS, owner="acme")
        await first.run(script="echo kept > note")
        again, started_again = await pool.get("w1", LIMITS, owner="acme")
        other, other_started = await pool.get("w1", LIMITS, owner="globex")
        listed = await other.files()
        live = pool.live()
    finally:
        await pool.close()

    assert (started, started_again, other_started) == (True, False, True)
    assert again is first
    assert other is not first
    assert not first.alive
    assert listed == []
    assert [(info.key, info.owner) for info in live] == [("w1", "globex")]


async def test_a_sandbox_starts_from_its_snapshot(pool_host: SandboxHost) -> None:
    pool = SandboxPool(pool_host)
    try:
        first, _ = await pool.get("w1", LIMITS, owner="acme")
        await first.run(script="mkdir out && echo 42 > out/answer")
        snapshot = await first.pack()
        await pool.stop("w1")

        async def restore() -> bytes:
            return snapshot

        second, started = await pool.get("w1", LIMITS, owner="acme", restore=restore)
        read = await second.run(["cat", "out/answer"])
    finally:
        await pool.close()

    assert started
    assert read.stdout == "42\n"


async def test_an_idle_sandbox_is_stopped_and_nothing_of_it_runs_on(
    pool_host: SandboxHost,
) -> None:
    pool = SandboxPool(pool_host, idle_s=0.3)
    sandbox, _ = await pool.get("w1", LIMITS, owner="acme")
    await sandbox.run(script="(sleep 60 &) ; setsid sleep 60 & echo started")
    await asyncio.wait_for(sandbox.ended(), 10)
    await pool.close()

    assert len(pool) == 0
    assert processes_of(sandbox.uid) == 0


async def test_the_least_recently_used_sandbox_makes_room_and_busy_ones_never_do(
    pool_host: SandboxHost,
) -> None:
    pool = SandboxPool(pool_host, max_live=2)
    try:
        one, _ = await pool.get("one", LIMITS, owner="acme")
        two, _ = await pool.get("two", LIMITS, owner="acme")
        await pool.get("one", LIMITS, owner="acme")  # `two` is now the least recently used
        three, _ = await pool.get("three", LIMITS, owner="acme")
        keys = sorted(info.key for info in pool.live())
        # Both calls under way: each has written its first line.
        going = {name: asyncio.Event() for name in ("one", "three")}

        def going_on(event: asyncio.Event) -> Callable[[str, str], None]:
            return lambda stream, text: event.set()

        calls = [
            asyncio.create_task(
                box.run(script="echo go; exec sleep 2", on_output=going_on(going[name]))
            )
            for name, box in (("one", one), ("three", three))
        ]
        await asyncio.gather(*(event.wait() for event in going.values()))
        with pytest.raises(SandboxesBusy):
            await pool.get("four", LIMITS, owner="acme")
        await asyncio.gather(*calls)
    finally:
        await pool.close()

    assert keys == ["one", "three"]
    assert not two.alive


async def test_two_pools_on_one_host_never_run_sandboxes_as_the_same_user(
    host: SandboxHost,
) -> None:
    """As two service processes on one host: each user's lock is held by one pool at most."""
    shared = SandboxHost(packages=host.packages, first_uid=free_uid(), uids=2)
    first, second = SandboxPool(shared), SandboxPool(shared)
    try:
        mine = [(await first.get(key, LIMITS, owner="acme"))[0] for key in ("a", "b")]
        with pytest.raises(SandboxesBusy):
            await second.get("c", LIMITS, owner="acme")
        await first.stop("a")
        theirs, _ = await second.get("c", LIMITS, owner="acme")
        still = await mine[1].run(["echo", "alive"])
    finally:
        await first.close()
        await second.close()

    assert theirs.uid == mine[0].uid
    assert still.stdout == "alive\n"  # the other pool's sandbox under the freed user is not it
