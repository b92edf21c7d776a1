"""Live sandboxes on bubblewrap: one process tree per sandbox, started once and kept while its
workspace is live, each call a request to the agent inside (`guest/agent.py`).

A sandbox runs as a host user of its own (one of `uids`, never a real account), in its own
mount, PID, IPC, UTS, network and user namespaces: the system's `/usr` read-only, a
workspace that is a tmpfs of the workspace's size (the only writable place besides a small
`/tmp`), no network (an empty namespace: not even the host's loopback), no service variables
(the environment is cleared), no capabilities, no new user namespaces. Limits are the
kernel's: per process address space, open files, file size and CPU time (`prlimit`); per
sandbox processes (its user's process count), workspace size (the tmpfs) and each call's wall
time (its process group killed). Its CPU seconds are read from the kernel's accounting of its
user, never from what runs inside."""

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import OmniForgeError

GUEST = Path(__file__).parent / "guest"
# The host directories that are links to /usr on a merged-/usr system, bound as they are.
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_SIGNALS = {24: "cpu_time", 25: "file_size"}  # SIGXCPU, SIGXFSZ
WORKSPACE = "/workspace"
# Processes and threads the sandbox's agent keeps for itself: what runs in a call is held to
# `processes` (the agent starts it so), so that a fork bomb never leaves the agent unable to
# start the threads that read the next call's output.
AGENT_PROCESSES = 16
PACKAGES = "/opt/omniforge/packages"
# The sandbox's whole environment (nothing of the service's).
_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKSPACE,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MPLBACKEND": "Agg",  # charts to files: there is no display
    "MPLCONFIGDIR": "/tmp/matplotlib",  # caches out of the workspace
    "XDG_CACHE_HOME": "/tmp/cache",
    "OPENBLAS_NUM_THREADS": "1",  # a thread per core would reserve memory it may not have
}
_OUT_OF_MEMORY = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_NO_SPACE = "No space left on device"
_TOO_LARGE = "File too large"  # Python ignores SIGXFSZ: its writes fail instead
_NO_PROCESS = "Resource temporarily unavailable"


class SandboxUnavailable(OmniForgeError):
    """Sandboxes cannot run on this host (bubblewrap or Python missing); says what to do."""


class SandboxFailed(OmniForgeError):
    """A sandbox stopped answering (it was killed, or its agent died)."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one sandbox may use: per call (`cpu_s`, `wall_s`, kept output), per process
    (`memory_mb` of address space, `open_files`, `file_size_mb`) and per sandbox
    (`processes`, `workspace_mb`)."""

    cpu_s: float = 30.0
    wall_s: float = 60.0
    memory_mb: int = 1024
    processes: int = 64
    open_files: int = 256
    file_size_mb: int = 64
    workspace_mb: int = 256
    tmp_mb: int = 64
    output_bytes: int = 256 * 1024


@dataclass(slots=True)
class Execution:
    """How one command went."""

    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    timed_out: bool
    cpu_s: float
    wall_s: float
    dropped_bytes: int
    created: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    workspace_bytes: int = 0
    # The limit that stopped it (`wall_time`, `cpu_time`, `memory`, `processes`,
    # `file_size`, `workspace_size`), None when none did.
    stopped_by: str | None = None
    # Python code's: its last expression's value (`repr`), its error's traceback, the charts
    # it left open (saved as PNG files), whether the kernel had to be started again first
    # (the variables of earlier calls lost) and whether it died in this call.
    value: str | None = None
    error: str | None = None
    figures: list[str] = field(default_factory=list)
    restarted: bool = False
    kernel_died: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.stopped_by is None and self.error is None


OnOutput = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class SandboxHost:
    """Where sandboxes run: bubblewrap, the Python their agent runs on, the read-only trees
    mounted in every sandbox (`mounts`: host path -> path inside) and the host users they
    run as."""

    bwrap: str = "/usr/bin/bwrap"
    python: str = "/usr/bin/python3"
    prlimit: str = "/usr/bin/prlimit"
    setpriv: str = "/usr/bin/setpriv"
    nice: str = "/usr/bin/nice"
    # The sandboxes' Python packages (requirements/sandbox.lock), importable by their code.
    packages: Path | None = None
    mounts: tuple[tuple[Path, str], ...] = ()
    first_uid: int = 200_000
    uids: int = 4096
    # The CPU group every sandbox joins (`cgroups.cpu_group`); None: none.
    cpu_group: Path | None = None
    # Where the processes of this host that run sandboxes lock the users they run them as.
    locks: str = os.path.join(tempfile.gettempdir(), "omniforge-sandbox-users")

    def check(self) -> None:
        """Raises `SandboxUnavailable` saying what is missing."""
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "each sandbox runs as a host user of its own, which only a service running "
                "as root can start processes as"
            )
        for path, package in (
            (self.bwrap, "bubblewrap"),
            (self.python, "python3"),
            (self.prlimit, "util-linux"),
            (self.setpriv, "util-linux"),
            (self.nice, "coreutils"),
        ):
            if not os.access(path, os.X_OK):
                raise SandboxUnavailable(
                    f"{path} is missing: sandboxes need Debian's `{package}` "
                    f"(`apt-get install -y {package}`; scripts/run and scripts/test install it)"
                )

    def command(self, limits: SandboxLimits, uid: int) -> list[str]:
        """The sandbox's command line: its user (`uid`, no groups), its limits, then
        bubblewrap, then its agent (each program exec's the next: one process)."""
        options: list[tuple[str, ...]] = [
            ("--unshare-all",),
            ("--unshare-user",),
            ("--disable-userns",),
            ("--die-with-parent",),
            ("--new-session",),
            ("--uid", "1000"),
            ("--gid", "1000"),
            ("--hostname", "sandbox"),
            ("--ro-bind", "/usr", "/usr"),
        ]
        for name in _TOP:
            top = Path("/") / name
            if top.is_symlink():
                options.append(("--symlink", os.readlink(top), f"/{name}"))
            elif top.is_dir():
                options.append(("--ro-bind", str(top), f"/{name}"))
        options += [
            ("--proc", "/proc"),
            ("--dev", "/dev"),
            ("--dir", "/etc"),
            ("--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"),
            ("--ro-bind-try", "/etc/localtime", "/etc/localtime"),
            ("--ro-bind-try", "/etc/fonts", "/etc/fonts"),  # charts' text
            ("--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp"),
            ("--size", str(limits.workspace_mb << 20), "--perms", "0700", "--tmpfs", WORKSPACE),
            ("--ro-bind", str(GUEST), "/opt/omniforge/guest"),
            *(("--ro-bind", str(path), inside) for path, inside in self.mounts),
            *(() if self.packages is None else [("--ro-bind", str(self.packages), PACKAGES)]),
            # The root's own tmpfs: nothing is writable but the workspace and /tmp.
            ("--remount-ro", "/"),
            ("--chdir", WORKSPACE),
            ("--clearenv",),
            *(("--setenv", name, value) for name, value in _ENVIRONMENT.items()),
            *(() if self.packages is None else [("--setenv", "PYTHONPATH", PACKAGES)]),
        ]
        return [
            self.setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            self.prlimit,
            f"--as={limits.memory_mb << 20}",
            # The agent's own threads and processes besides what the calls may run.
            f"--nproc={limits.processes + AGENT_PROCESSES}",
            f"--nofile={limits.open_files}",
            f"--fsize={limits.file_size_mb << 20}",
            "--core=0",
            "--",
            # Below the service's priority, inherited by everything inside (with the CPU
            # group, if any, as the ceiling of all sandboxes together).
            self.nice,
            "-n",
            "10",
            self.bwrap,
            *(part for option in options for part in option),
            "--",
            self.python,
            "-I",
            "-S",
            "/opt/omniforge/guest/agent.py",
        ]


def stopped_by(execution: Execution, limits: SandboxLimits) -> str | None:
    """The limit that stopped a command, told from how it ended: the wall-time limit (its
    group killed), a signal the kernel sends at a limit (CPU time, file size), or an error its
    output names (no memory, no space left in the workspace, no more processes)."""
    said = execution.stderr + (execution.error or "")
    failed_fork = _NO_PROCESS in said
    if execution.timed_out:
        return "processes" if failed_fork else "wall_time"
    if execution.signal in _SIGNALS:
        return _SIGNALS[execution.signal]
    if execution.signal == 9 and execution.cpu_s >= limits.cpu_s:
        return "cpu_time"  # past the soft limit's signal, at the hard limit
    if execution.exit_code == 0 and execution.error is None:
        return None
    if any(marker in said for marker in _OUT_OF_MEMORY):
        return "memory"
    if _NO_SPACE in said:
        return "workspace_size"
    if _TOO_LARGE in said or "File size limit exceeded" in said:  # a write's, a shell's
        return "file_size"
    if "CPU time limit exceeded" in said:  # a shell's word on its command
        return "cpu_time"
    if failed_fork:
        return "processes"
    return None
