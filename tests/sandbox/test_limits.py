"""Abuse, tried in a real sandbox: each is stopped at its limit, says which, and leaves the
sandbox able to answer the next call; the CPU it burnt is measured from outside."""

from tests.sandbox.conftest import StartSandbox, processes_of

FORK_BOMB = """
import os
while True:
    os.fork()
"""


async def test_a_busy_loop_stops_at_its_cpu_limit_and_is_billed_what_it_burnt(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = await start_sandbox(cpu_s=1, wall_s=20)
    looped = await sandbox.run(script="while true; do :; done")
    after = await sandbox.run(["echo", "still here"])

    assert looped.stopped_by == "cpu_time"
    assert looped.signal == 24  # SIGXCPU
    assert not looped.timed_out
    assert 0.9 <= looped.cpu_s <= 3.0
    assert looped.wall_s < 10
    assert after.ok
    assert after.stdout == "still here\n"


async def test_a_command_that_waits_stops_at_its_wall_time_limit(
    start_sandbox: StartSandbox,
) -> None:
    sandbox = await start_sandbox(wall_s=1)
    slept = await sandbox.run(["sleep", "30"])

    assert slept.stopped_by == "wall_time"
    assert slept.timed_out
    assert slept.signal == 9
    assert 1.0 <= slept.wall_s < 5
    assert slept.cpu_s < 0.5  # waiting costs nothing


async def test_a_fork_bomb_stops_at_the_process_limit(start_sandbox: StartSandbox) -> None:
    sandbox = await start_sandbox(processes=24, wall_s=5)
    bombed = await sandbox.run(["python3", "-c", FORK_BOMB])
    after = await sandbox.run(["echo", "still here"])

    assert bombed.stopped_by == "processes"
    assert "Resource temporarily unavailable" in bombed.stderr
    # Nothing of it outlives the call: the sandbox's init, its agent (and its prlimit) only.
    assert processes_of(sandbox.uid) <= 4
    assert after.stdout == "still here\n"


async def test_a_memory_bomb_stops_at_the_memory_limit(start_sandbox: StartSandbox) -> None:
    sandbox = await start_sandbox(memory_mb=256)
    bombed = await sandbox.run(
        ["python3", "-c", "blocks = [bytearray(1 << 20) for _ in range(4096)]"]
    )
    fitting = await sandbox.run(["python3", "-c", "print(len(bytearray(64 << 20)))"])

    assert bombed.stopped_by == "memory"
    assert "MemoryError" in bombed.stderr
    assert fitting.ok
    assert fitting.stdout == f"{64 << 20}\n"


async def test_filling_the_workspace_stops_at_its_size(start_sandbox: StartSandbox) -> None:
    sandbox = await start_sandbox(workspace_mb=8, file_size_mb=4)
    filled = await sandbox.run(
        script="for i in $(seq 1 100); do head -c 1048576 /dev/zero > f$i || exit 1; done"
    )
    listed = await sandbox.files()

    assert filled.stopped_by == "workspace_size"
    assert "No space left on device" in filled.stderr
    assert filled.workspace_bytes <= 8 << 20
    assert sum(f["size"] for f in listed) <= 8 << 20
    assert 6 <= len(filled.created) <= 9


async def test_one_file_stops_at_the_file_size_limit(start_sandbox: StartSandbox) -> None:
    sandbox = await start_sandbox(file_size_mb=1, workspace_mb=16)
    written = await sandbox.run(["python3", "-c", "open('big', 'wb').write(bytes(2 << 20))"])

    cut = await sandbox.run(script="head -c 3000000 /dev/zero > other")

    assert written.stopped_by == "file_size"
    assert "File too large" in written.stderr  # Python ignores the signal: its write fails
    assert cut.stopped_by == "file_size"
    assert cut.signal is None
    assert cut.exit_code == 153
    assert sorted(f["size"] for f in await sandbox.files()) == [1 << 20, 1 << 20]


async def test_output_past_its_limit_is_dropped_and_counted(start_sandbox: StartSandbox) -> None:
    sandbox = await start_sandbox(output_bytes=1000)
    shown: list[str] = []
    loud = await sandbox.run(
        ["python3", "-c", "print('x' * 5000)"], on_output=lambda s, text: shown.append(text)
    )

    assert loud.ok
    assert loud.stdout == "x" * 1000
    assert "".join(shown) == loud.stdout
    assert loud.dropped_bytes == 4001
