"""workspace_snapshots: sandboxed workspaces' snapshots, deleted with their conversation or
task

Revision ID: f1a2b3c4d5e7
Revises: e0f1a2b3c4d5
Create Date: 2026-11-29 17:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f1a2b3c4d5e7"
down_revision: str | None = "e0f1a2b3c4d5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workspace_snapshots",
        sa.Column("key", sa.String(80), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.Uuid(), nullable=True),
        sa.Column("task_id", sa.Uuid(), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
    )
    op.create_index("ix_workspace_snapshots_tenant", "workspace_snapshots", ["tenant_id"])
    op.create_index("ix_workspace_snapshots_task_id", "workspace_snapshots", ["task_id"])
    op.create_index(
        "ix_workspace_snapshots_conversation_id", "workspace_snapshots", ["conversation_id"]
    )


def downgrade() -> None:
    op.drop_table("workspace_snapshots")
