"""Sandboxed workspaces of a tenant's conversations and tasks, and the sandbox tools."""

import dataclasses
import logging
from pathlib import Path

from app.config import Settings
from app.resources.sandboxes.workspaces import RunWorkspace, Workspaces, workspace_key
from app.sandbox import SandboxHost, SandboxLimits, SandboxPool, SandboxUnavailable
from app.sandbox.cgroups import cpu_group
from app.storage.database import Database
from app.storage.workspaces import WorkspaceSnapshots
from app.tools.builtin.sandbox import sandbox_tools
from app.tools.registry import ToolRegistry

__all__ = ["RunWorkspace", "Workspaces", "build_workspaces", "workspace_key"]

logger = logging.getLogger(__name__)
# What a sandbox call may take besides its own wall time: starting the sandbox, restoring
# its workspace, snapshotting it after.
_CALL_OVERHEAD_S = 60.0


def build_workspaces(
    settings: Settings, registry: ToolRegistry, database: Database
) -> Workspaces | None:
    """The process's workspaces, with the sandbox tools registered (offered to runs that name
    them), when sandboxes are on and this host can run them; None otherwise (said in the
    log, or with `sandboxes=on`, raised as `SandboxUnavailable`)."""
    if settings.sandboxes == "off":
        return None
    packages = settings.sandbox_packages_dir
    if packages is None and Path(".sandbox/packages").is_dir():
        packages = Path(".sandbox/packages").resolve()
    host = SandboxHost(packages=packages, first_uid=settings.sandbox_first_uid)
    try:
        host.check()
    except SandboxUnavailable as exc:
        if settings.sandboxes == "on":
            raise
        logger.warning("sandboxes are off: %s", exc)
        return None
    host = dataclasses.replace(host, cpu_group=cpu_group(settings.sandbox_cpu_share))
    limits = SandboxLimits(
        cpu_s=settings.sandbox_cpu_s,
        wall_s=settings.sandbox_wall_s,
        memory_mb=settings.sandbox_memory_mb,
        processes=settings.sandbox_processes,
        workspace_mb=settings.sandbox_workspace_mb,
    )
    pool = SandboxPool(host, max_live=settings.sandbox_max_live, idle_s=settings.sandbox_idle_s)
    timeout_s = settings.sandbox_wall_s + _CALL_OVERHEAD_S
    for tool in sandbox_tools(timeout_s, cpu_second_usd=settings.sandbox_cpu_second_usd):
        registry.register(tool, on_request=True)
    return Workspaces(pool, WorkspaceSnapshots(database), limits)
