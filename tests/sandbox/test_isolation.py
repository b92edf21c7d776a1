"""What a sandbox cannot reach, tried from inside a real one: the network (the host's loopback
and the service's ports included), the host's files and the service's environment, another
sandbox's workspace and processes."""

import asyncio
import os
import socket
from collections.abc import AsyncIterator

import pytest

from tests.sandbox.conftest import StartSandbox

SECRET = "probe-3f1c9a-must-not-leak"


@pytest.fixture
async def listening() -> AsyncIterator[int]:
    """A port on the host's loopback that accepts connections."""
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    async with server:
        yield port


async def test_no_network_not_even_the_hosts_loopback(
    start_sandbox: StartSandbox, listening: int
) -> None:
    sandbox = await start_sandbox()
    results = {}
    for host, port in (("127.0.0.1", listening), ("127.0.0.1", 5432), ("10.0.0.1", 80)):
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(({host!r}, {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print(type(exc).__name__, exc.errno)\n"
        )
        execution = await sandbox.run(["python3", "-c", code])
        results[(host, port)] = execution.stdout.strip()
    interfaces = await sandbox.run(["cat", "/proc/net/dev"])

    # The host's loopback accepts this connection from outside the sandbox.
    with socket.create_connection(("127.0.0.1", listening), timeout=2):
        pass
    assert results[("127.0.0.1", listening)] == "ConnectionRefusedError 111"
    assert results[("127.0.0.1", 5432)] == "ConnectionRefusedError 111"
    assert results[("10.0.0.1", 80)].startswith("OSError 101")  # network unreachable
    devices = [line.split(":")[0].strip() for line in interfaces.stdout.splitlines()[2:]]
    assert devices == ["lo"]


async def test_host_files_and_the_services_environment_are_out_of_reach(
    start_sandbox: StartSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIFORGE_PROBE_SECRET", SECRET)
    sandbox = await start_sandbox()
    here = os.getcwd()
    tried = {
        path: await sandbox.run(["cat", path])
        for path in ("/etc/shadow", "/etc/passwd", "/root/.bashrc", f"{here}/pyproject.toml")
    }
    environment = await sandbox.run(
        script="env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ls /proc"
    )
    sockets = await sandbox.run(
        script="ls -a /tmp /run /var/run 2>&1; find / -name '.s.PGSQL*' 2>/dev/null; true"
    )
    writable = await sandbox.run(script="touch /usr/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1")

    for path, execution in tried.items():
        assert execution.exit_code != 0, path
        assert "No such file" in execution.stderr, (path, execution.stderr)
    assert SECRET not in environment.stdout
    assert "OMNIFORGE" not in environment.stdout
    # Its own processes alone: the sandbox's init, its agent, this command's.
    pids = [line for line in environment.stdout.splitlines() if line.isdigit()]
    assert len(pids) <= 6, pids
    assert "PGSQL" not in sockets.stdout
    assert (
        writable.stdout.count("Read-only file system") + writable.stdout.count("Permission denied")
        == 3
    ), writable.stdout


async def test_one_sandbox_sees_neither_the_files_nor_the_processes_of_another(
    start_sandbox: StartSandbox,
) -> None:
    first, second = await start_sandbox(), await start_sandbox()
    await first.run(script=f"echo {SECRET} > secret.txt")
    ready = asyncio.Event()
    running = asyncio.create_task(
        first.run(
            script="echo ready; exec sleep 2",
            on_output=lambda stream, text: ready.set() if "ready" in text else None,
        )
    )
    await ready.wait()  # the first sandbox's `sleep` is running now
    seen = await second.run(
        # The secret is named in two halves: this command's own line must not hold it.
        script=f'S={SECRET[:6]}; ls -a /workspace; grep -rs "$S{SECRET[6:]}" /workspace /tmp '
        "/opt /etc 2>/dev/null; cat /proc/[0-9]*/cmdline"
    )
    await running
    files = await first.files()

    assert [f["path"] for f in files] == ["secret.txt"]
    assert SECRET not in seen.stdout
    assert "secret.txt" not in seen.stdout
    assert "sleep" not in seen.stdout
    assert "agent.py" in seen.stdout  # its own processes are listed
