"""Sandboxed workspaces: one per conversation (or per task without one), live in this
process's sandbox pool while in use, snapshotted to the database after every call that
changed its files, so that a run resumed on another instance (or after the sandbox was
stopped idle) finds the workspace as the last stored call left it. A snapshot is deleted with
its conversation or task (retention and erasure included)."""

import hashlib
from typing import Any
from uuid import UUID

from app.chain.models import utc_now
from app.sandbox import Execution, LiveInfo, LiveSandbox, SandboxLimits, SandboxPool, cgroups
from app.sandbox.bubblewrap import OnOutput
from app.sandbox.pool import Restore
from app.storage.workspaces import WorkspaceSnapshots


def workspace_key(tenant_id: str, conversation_id: UUID | None, task_id: UUID) -> str:
    """A workspace's key: its conversation's, else its task's (the pool's key, and, hashed,
    its snapshot's in the database)."""
    owner = f"conversation:{conversation_id}" if conversation_id else f"task:{task_id}"
    return f"{tenant_id}/{owner}"


def _snapshot_key(key: str) -> str:
    return "workspace-" + hashlib.sha256(key.encode()).hexdigest()[:48]


class Workspaces:
    """Every tenant's workspaces in this process: sandboxes of `limits` from `pool`, their
    snapshots in `snapshots`."""

    def __init__(
        self, pool: SandboxPool, snapshots: WorkspaceSnapshots, limits: SandboxLimits
    ) -> None:
        self.pool = pool
        self.snapshots = snapshots
        self.limits = limits

    def for_run(
        self, tenant_id: str, *, conversation_id: UUID | None, task_id: UUID
    ) -> "RunWorkspace":
        return RunWorkspace(self, tenant_id, conversation_id, task_id)

    def live(self, tenant_id: str) -> list[LiveInfo]:
        return self.pool.live(owner=tenant_id)

    async def stop(self, tenant_id: str, key: str) -> bool:
        """Stops a live sandbox of the tenant (its snapshot stays); whether there was one."""
        if not any(info.key == key for info in self.pool.live(owner=tenant_id)):
            return False
        return await self.pool.stop(key)

    async def forget(self, tenant_id: str, conversation_id: UUID | None, task_id: UUID) -> None:
        """Stops a workspace's sandbox and deletes its snapshot (its conversation or task
        is deleted)."""
        key = workspace_key(tenant_id, conversation_id, task_id)
        await self.pool.stop(key)
        await self.snapshots.delete(_snapshot_key(key), tenant_id)

    async def close(self) -> None:
        await self.pool.close()
        if self.pool.host.cpu_group is not None:
            cgroups.remove(self.pool.host.cpu_group)


class RunWorkspace:
    """One run's workspace, its sandbox started (and restored) on its first call."""

    def __init__(
        self,
        workspaces: Workspaces,
        tenant_id: str,
        conversation_id: UUID | None,
        task_id: UUID,
    ) -> None:
        self._workspaces = workspaces
        self.tenant_id = tenant_id
        self.conversation_id = conversation_id
        self.task_id = task_id
        self.key = workspace_key(tenant_id, conversation_id, task_id)
        self._snapshot = _snapshot_key(self.key)

    async def python(self, code: str, *, on_output: OnOutput | None = None) -> Execution:
        sandbox, fresh = await self._sandbox()
        execution = await sandbox.python(code, on_output=on_output)
        # A sandbox started from a snapshot has a new kernel: earlier variables are gone.
        execution.restarted = execution.restarted or fresh
        await self._saved(sandbox, execution)
        return execution

    async def run(
        self,
        argv: list[str] | None,
        *,
        script: str | None = None,
        stdin: str | None = None,
        on_output: OnOutput | None = None,
    ) -> Execution:
        sandbox, _ = await self._sandbox()
        execution = await sandbox.run(argv, script=script, stdin=stdin, on_output=on_output)
        await self._saved(sandbox, execution)
        return execution

    async def files(self) -> list[dict[str, Any]]:
        sandbox, _ = await self._sandbox()
        return await sandbox.files()

    async def read(self, path: str, max_bytes: int) -> bytes | None:
        sandbox, _ = await self._sandbox()
        return await sandbox.read(path, max_bytes)

    async def write(self, path: str, data: bytes) -> None:
        sandbox, _ = await self._sandbox()
        await sandbox.write(path, data)
        await self._save(sandbox)

    async def _sandbox(self) -> tuple[LiveSandbox, bool]:
        """The live sandbox, and whether it was started from a snapshot now."""
        restored = False
        snapshots = self._workspaces.snapshots

        async def restore() -> bytes | None:
            nonlocal restored
            archive = await snapshots.load(self._snapshot, self.tenant_id)
            restored = archive is not None
            return archive

        loader: Restore = restore
        sandbox, _ = await self._workspaces.pool.get(
            self.key, self._workspaces.limits, owner=self.tenant_id, restore=loader
        )
        return sandbox, restored

    async def _saved(self, sandbox: LiveSandbox, execution: Execution) -> None:
        if execution.created or execution.changed or execution.deleted:
            await self._save(sandbox)

    async def _save(self, sandbox: LiveSandbox) -> None:
        await self._workspaces.snapshots.save(
            self._snapshot,
            await sandbox.pack(),
            tenant_id=self.tenant_id,
            conversation_id=self.conversation_id,
            task_id=self.task_id,
            at=utc_now(),
        )
