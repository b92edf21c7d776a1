"""Sandboxed workspaces' snapshots: a conversation's (or a task's) workspace as its last call
that changed it left it, deleted with the conversation or the task it belongs to."""

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKeyConstraint,
    Index,
    LargeBinary,
    String,
    Table,
    Uuid,
)

from app.storage.tables.schema import TENANT_ID, metadata
from app.storage.types import UTCDateTime

workspace_snapshots = Table(
    "workspace_snapshots",
    metadata,
    # The workspace's key (its tenant and conversation, or task), hashed.
    Column("key", String(80), primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    # Whose workspace it is: a conversation's, else a task's (exactly one of them is set).
    Column("conversation_id", Uuid),
    Column("task_id", Uuid),
    # The workspace as a gzipped tar.
    Column("data", LargeBinary, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
    Index("ix_workspace_snapshots_tenant", "tenant_id"),
    Index("ix_workspace_snapshots_task_id", "task_id"),
    Index("ix_workspace_snapshots_conversation_id", "conversation_id"),
)
