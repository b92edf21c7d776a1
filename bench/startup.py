"""How soon `omniforge` answers, and how soon its service is ready, beside LangGraph's dev
server started the same way (`scripts/bench startup`).

- `omniforge --help` and `omniforge token …`: CPU (user + system) of the command, as a user
  runs it (the virtualenv's console script), from `os.wait4`.
- `omniforge serve` on the embedded default (SQLite in a fresh temporary data directory, the
  demo model) and `langgraph dev --no-browser` (its in-memory runtime, a one-node graph project
  written here): wall time from spawn to the first 200 of the readiness endpoint (`/readyz`,
  `/ok`), CPU of the process tree at that moment, RSS then and once idle; then a restart on
  the same data, and the first task (run) submitted the moment it is ready, to its end.

Readiness is found by asking the endpoint every `PROBE_EVERY_S` (`bench.server_start`): it is
the server's own readiness signal, and nothing else tells a client it is up. The peer
(`bench.langgraph_peer`) is installed once, from exact versions, and reused.
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from bench import langgraph_peer
from bench.server_start import IDLE_AFTER_S, PROBE_EVERY_S, Start, start_server

ROOT = Path(__file__).resolve().parent.parent
TASK_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Side:
    """One server's starts: fresh (an empty data directory) and restarts (the same data)."""

    name: str
    fresh: list[Start] = field(default_factory=list)
    restart: list[Start] = field(default_factory=list)


@dataclass(slots=True)
class StartupResult:
    repetitions: int
    help_cpu_s: list[float]
    token_cpu_s: list[float]
    ours: Side
    peer: Side | None
    peer_problem: str | None
    peer_versions: dict[str, str]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def run(repetitions: int) -> StartupResult:
    load_before = os.getloadavg()
    help_cpu, token_cpu = _commands(repetitions)
    peer_problem = None
    peer: Side | None = None
    versions: dict[str, str] = {}
    try:
        langgraph = langgraph_peer.install()
        versions = langgraph_peer.versions()
        peer = Side("langgraph dev")
    except langgraph_peer.PeerUnavailable as exc:
        peer_problem = str(exc)
    ours = Side("omniforge serve")
    with tempfile.TemporaryDirectory(prefix="omniforge-startup-") as scratch:
        project = Path(scratch) / "peer-project"
        langgraph_peer.write_project(project)
        for round_ in range(repetitions + 1):  # the first round warms the file caches
            keep = round_ > 0
            data = Path(scratch) / f"data-{round_}"
            fresh, restart = _ours(data)
            if keep:
                ours.fresh.append(fresh)
                ours.restart.append(restart)
            if peer is not None:
                fresh, restart = langgraph_peer.starts(langgraph, project)
                if keep:
                    peer.fresh.append(fresh)
                    peer.restart.append(restart)
    return StartupResult(
        repetitions=repetitions,
        help_cpu_s=help_cpu,
        token_cpu_s=token_cpu,
        ours=ours,
        peer=peer,
        peer_problem=peer_problem,
        peer_versions=versions,
        load_before=load_before,
        load_after=os.getloadavg(),
    )


# The light commands ---------------------------------------------------------------------------


def omniforge_command() -> str:
    return str(Path(sys.prefix) / "bin" / "omniforge")


def _commands(repetitions: int) -> tuple[list[float], list[float]]:
    """CPU of `--help` and `token`, interleaved, after one warm-up run of each; a
    development install in a temporary data directory (its secret made by the warm-up)."""
    help_cpu: list[float] = []
    token_cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="omniforge-token-") as data:
        env = our_env(Path(data))
        token = [omniforge_command(), "token", "--tenant", "default", "--sub", "bench"]
        for round_ in range(repetitions + 1):
            help_s = _cpu_of([omniforge_command(), "--help"], env)
            token_s = _cpu_of(token, env)
            if round_ > 0:
                help_cpu.append(help_s)
                token_cpu.append(token_s)
    return help_cpu, token_cpu


def _cpu_of(command: Sequence[str], env: dict[str, str]) -> float:
    """User + system CPU of `command` (and of any child it waited for), from `wait4`."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=errors, cwd=ROOT
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{' '.join(command[1:])} failed: {errors.read()[-500:]!r}")
    return usage.ru_utime + usage.ru_stime


def our_env(data: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OMNIFORGE_")}
    return {**env, "OMNIFORGE_DATA_DIR": str(data)}


# The service ----------------------------------------------------------------------------------


def _ours(data: Path) -> tuple[Start, Start]:
    """A fresh start (measured to idle), then a restart on the same data whose first task is
    submitted the moment it is ready."""
    env = our_env(data)
    # Minted first: in development it makes the secret the service will sign with.
    token = subprocess.run(
        [omniforge_command(), "token", "--tenant", "default", "--sub", "bench"],
        env=env,
        capture_output=True,
        check=True,
        text=True,
    ).stdout.strip()
    command = [omniforge_command(), "serve", "--port"]
    fresh = start_server(command, env, data, "/readyz", idle=True)
    restart = start_server(command, env, data, "/readyz", task=_our_task(token))
    return fresh, restart


def _our_task(token: str) -> Callable[[int], None]:
    def submit(port: int) -> None:
        body = json.dumps({"input": "What is 17 * 23 + 4?"})
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TASK_TIMEOUT_S)
        try:
            connection.request("POST", "/api/v1/tasks", body, headers)
            response = connection.getresponse()
            if response.status != 200:
                raise RuntimeError(f"task refused: {response.status} {response.read()[:300]!r}")
            event = ""
            for raw in response:  # the stream, to its `done`
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event == "done":
                    state = json.loads(line.removeprefix("data:"))["final_state"]
                    if state != "completed":
                        raise RuntimeError(f"the first task ended {state}")
                    return
            raise RuntimeError("the task's stream ended without `done`")
        finally:
            connection.close()

    return submit


# The report -------------------------------------------------------------------------------


def spread(values: Sequence[float], unit: str = "s", digits: int = 2) -> str:
    """median [min–max]."""
    if not values:
        return "n/a"
    return f"{median(values):.{digits}f} {unit} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def column(starts: Sequence[Start], name: str, unit: str = "s", digits: int = 2) -> str:
    values = [value for start in starts if (value := getattr(start, name)) is not None]
    return spread(values, unit, digits)


def report(r: StartupResult, *, token_target_s: float) -> None:
    peer = r.peer
    versions = ", ".join(f"{name} {version}" for name, version in r.peer_versions.items())
    load = " / ".join(f"{value:.2f}" for value in r.load_before)
    load_after = " / ".join(f"{value:.2f}" for value in r.load_after)
    print(
        "\nStart-up: the light commands' CPU; `omniforge serve` beside LangGraph's dev server"
        f" ({versions or 'not installed'})\n"
        f"  conditions: {os.cpu_count()} CPUs shared with whatever else runs (load average"
        f" 1/5/15 min {load} before, {load_after} after); Python {sys.version.split()[0]} for"
        f" both; median [min–max] of {r.repetitions} runs after one warm-up run, the two"
        " servers alternating; each server a fresh process group on 127.0.0.1, a free port,"
        f" stdout to a file; readiness asked every {PROBE_EVERY_S * 1000:g} ms (its endpoint"
        " is the only signal a client has); CPU and RSS of the process tree (summed) from"
        " /proc; `omniforge serve`: development settings, SQLite in a fresh temporary data"
        " directory, the demo model; `langgraph dev --no-browser`: its default reloader and"
        " in-memory runtime, a one-node graph, analytics, version check and tracing off"
    )
    token = median(r.token_cpu_s)
    print(
        f"  omniforge --help   CPU {spread(r.help_cpu_s)}\n"
        f"  omniforge token    CPU {spread(r.token_cpu_s)} (target <= {token_target_s:g} s:"
        f" {'met' if token <= token_target_s else 'MISSED'})"
    )
    rows = [
        ("fresh start: spawn -> ready, wall", "fresh", "wall_s", "s"),
        ("  CPU at ready", "fresh", "cpu_s", "s"),
        ("  RSS at ready", "fresh", "rss_mb", "MB"),
        (f"  RSS idle (ready + {IDLE_AFTER_S:g} s)", "fresh", "idle_rss_mb", "MB"),
        (f"  CPU from ready to + {IDLE_AFTER_S:g} s", "fresh", "idle_cpu_s", "s"),
        ("restart (same data): spawn -> ready", "restart", "wall_s", "s"),
        ("  first task submitted at ready: -> done", "restart", "first_task_s", "s"),
    ]
    print(f"  {'':<42} {r.ours.name:<28} {peer.name if peer else 'langgraph dev'}")
    for label, which, name, unit in rows:
        digits = 0 if unit == "MB" else 2
        ours = column(getattr(r.ours, which), name, unit, digits)
        theirs = column(getattr(peer, which), name, unit, digits) if peer else "n/a"
        print(f"  {label:<42} {ours:<28} {theirs}")
    if peer is None:
        print(f"  the peer could not be measured: {r.peer_problem}")
        return
    ours_s = median(start.wall_s for start in r.ours.fresh)
    theirs_s = median(start.wall_s for start in peer.fresh)
    print(
        f"  ready no slower than the peer (median wall, fresh start): {ours_s:.2f} s vs"
        f" {theirs_s:.2f} s: {'met' if ours_s <= theirs_s else 'MISSED'}"
    )
