"""One start of a server, measured: spawn -> the first 200 of its readiness endpoint (wall),
CPU and RSS of its process tree then (from /proc), and what the caller asks for after."""

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

PROBE_EVERY_S = 0.01
IDLE_AFTER_S = 5.0
READY_TIMEOUT_S = 60.0
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Start:
    """One start of a server: spawn -> first 200 of its readiness endpoint."""

    wall_s: float
    cpu_s: float  # of the process tree, at that moment
    rss_mb: float  # of the process tree (summed), at that moment
    idle_rss_mb: float | None = None  # `IDLE_AFTER_S` later
    idle_cpu_s: float | None = None  # CPU spent from ready to then
    first_task_s: float | None = None  # a task submitted at ready: ready -> its end


def start_server(
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    ready_path: str,
    *,
    idle: bool = False,
    task: Callable[[int], None] | None = None,
) -> Start:
    """Spawns `command` with a free port appended, in its own process group (stopped whole
    after), its output to a log file beside `cwd`; measures its start to `ready_path`, then
    runs `task` against it the moment it is ready and, with `idle`, waits `IDLE_AFTER_S`."""
    port = free_port()
    log = cwd.parent / f"{cwd.name}-{port}.log"
    cwd.mkdir(parents=True, exist_ok=True)
    first_task_s = idle_rss_mb = idle_cpu_s = None
    with open(log, "wb") as output, _running([*command, str(port)], env, cwd, output) as process:
        began = time.perf_counter()
        _wait_ready(process, port, ready_path, log)
        wall_s = time.perf_counter() - began
        tree = _tree(process.pid)
        cpu_s, rss_mb = _cpu_s(tree), _rss_mb(tree)
        if task is not None:
            began = time.perf_counter()
            task(port)
            first_task_s = time.perf_counter() - began
        if idle:
            time.sleep(IDLE_AFTER_S)  # not a synchronisation: the time the figure names
            tree = _tree(process.pid)
            idle_rss_mb, idle_cpu_s = _rss_mb(tree), _cpu_s(tree) - cpu_s
    return Start(wall_s, cpu_s, rss_mb, idle_rss_mb, idle_cpu_s, first_task_s)


@contextlib.contextmanager
def _running(
    command: list[str], env: dict[str, str], cwd: Path, output: BinaryIO
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped whole
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], port: int, path: str, log: Path) -> None:
    """Asks `path` every `PROBE_EVERY_S` until it answers 200 (the server's readiness signal)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited: {log.read_text(errors='replace')[-800:]}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", path)
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass  # not listening yet
        finally:
            connection.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {READY_TIMEOUT_S:g} s: {log}")
        time.sleep(PROBE_EVERY_S)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tree(root: int) -> list[int]:
    """`root` and its live descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
    tree, frontier = [root], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        tree += children
        frontier = children
    return tree


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name, from `state` on."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _cpu_s(pids: list[int]) -> float:
    """utime + stime of each (and cutime + cstime: its children already waited for)."""
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = _stat(pid)
            ticks += sum(int(value) for value in fields[11:15])
    return ticks * _TICK_S


def _rss_mb(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024
