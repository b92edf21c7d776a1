"""Sandboxed workspaces' snapshots, one row per workspace, replaced at each save."""

from datetime import datetime
from uuid import UUID

from sqlalchemy import delete, insert, select

from app.storage.database import Database
from app.storage.tables import workspace_snapshots


class WorkspaceSnapshots:
    """A tenant's workspaces' snapshots by key; a conversation's or a task's deletion deletes
    its own (the rows' foreign keys, and the erasure of a task's rows)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def save(
        self,
        key: str,
        data: bytes,
        *,
        tenant_id: str,
        conversation_id: UUID | None,
        task_id: UUID | None,
        at: datetime,
    ) -> None:
        w = workspace_snapshots.c
        async with self._database.transaction() as connection:
            await connection.execute(delete(workspace_snapshots).where(w.key == key))
            await connection.execute(
                insert(workspace_snapshots).values(
                    key=key,
                    tenant_id=tenant_id,
                    conversation_id=conversation_id,
                    task_id=None if conversation_id is not None else task_id,
                    data=data,
                    size_bytes=len(data),
                    updated_at=at,
                )
            )

    async def load(self, key: str, tenant_id: str) -> bytes | None:
        w = workspace_snapshots.c
        async with self._database.read() as connection:
            data = await connection.scalar(
                select(w.data).where(w.key == key, w.tenant_id == tenant_id)
            )
        return None if data is None else bytes(data)

    async def delete(self, key: str, tenant_id: str) -> None:
        w = workspace_snapshots.c
        async with self._database.transaction() as connection:
            await connection.execute(
                delete(workspace_snapshots).where(w.key == key, w.tenant_id == tenant_id)
            )
