"""A CPU group for a process's sandboxes, where the host lets the service make one: all its
sandboxes together get at most a share of the host's CPUs (the cgroup's CPU quota), whatever
they run, so the service itself keeps the rest. Without one (no writable cgroup CPU
controller) the sandboxes' lower priority (nice 10) alone protects the service."""

import contextlib
import itertools
import logging
import os
from pathlib import Path

from app.sandbox.procs import processes_of

logger = logging.getLogger(__name__)

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000
_GROUPS = itertools.count(1)
_PREFIX = "omniforge-sandboxes-"


def cpu_group(share: float, name: str | None = None) -> Path | None:
    """A new CPU cgroup (v1 `cpu` controller, or v2 with `cpu` enabled) whose processes
    together use at most `share` of the host's CPUs; None where none can be made."""
    name = name or f"{_PREFIX}{os.getpid()}-{next(_GROUPS)}"
    quota = max(1_000, int(share * (os.cpu_count() or 1) * _PERIOD_US))
    try:
        if (_V1 / "cpu.cfs_quota_us").exists():
            _remove_stale(_V1)
            group = _V1 / name
            group.mkdir(exist_ok=True)
            (group / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
            return group
        if "cpu" in (_V2 / "cgroup.subtree_control").read_text().split():
            _remove_stale(_V2)
            group = _V2 / name
            group.mkdir(exist_ok=True)
            (group / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
            return group
    except OSError as exc:
        logger.info("sandboxes share no CPU group (%s): their priority alone bounds them", exc)
    return None


def join(group: Path, uid: int) -> None:
    """Moves every process of a host user (a sandbox's) into `group`; what they start
    later is in it too."""
    for pid in processes_of(uid):
        with contextlib.suppress(OSError):  # it ended meanwhile
            (group / "cgroup.procs").write_text(str(pid))


def remove(group: Path) -> None:
    """Removes the group (once its processes ended)."""
    with contextlib.suppress(OSError):
        group.rmdir()


def _remove_stale(root: Path) -> None:
    """Removes the groups of processes that ended without removing theirs (killed)."""
    for group in root.glob(f"{_PREFIX}*"):
        pid = group.name.removeprefix(_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            remove(group)
