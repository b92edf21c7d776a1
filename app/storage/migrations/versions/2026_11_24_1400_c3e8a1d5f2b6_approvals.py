"""approvals: tool calls that wait for a human's decision; a tenant's approval rules

Revision ID: c3e8a1d5f2b6
Revises: b6e1f0a2c3d4
Create Date: 2026-11-24 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c3e8a1d5f2b6"
down_revision: str | None = "b6e1f0a2c3d4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = "status = 'pending'"


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    op.add_column("tenants", sa.Column("approvals", json_type, nullable=True))
    op.create_table(
        "approvals",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("chain_id", sa.Uuid(), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("tool_type", sa.String(length=32), nullable=False),
        sa.Column("visibility", sa.String(length=32), nullable=False),
        sa.Column("arguments", json_type, nullable=False),
        sa.Column("input_schema", json_type, nullable=False),
        sa.Column("held_step_ids", json_type, nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("submitter_decides", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("decided_by", sa.String(length=255), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("decided_arguments", json_type, nullable=True),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("expires_at", moment, nullable=False),
        sa.Column("decided_at", moment, nullable=True),
        sa.Column("consumed_at", moment, nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_approvals_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
    )
    op.create_index("ix_approvals_task", "approvals", ["task_id", "created_at"], unique=False)
    op.create_index(
        "ix_approvals_tenant_status", "approvals", ["tenant_id", "status", "created_at", "id"]
    )
    op.create_index(
        "ix_approvals_pending_expiry",
        "approvals",
        ["expires_at"],
        postgresql_where=sa.text(PENDING),
        sqlite_where=sa.text(PENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_approvals_pending_expiry", table_name="approvals")
    op.drop_index("ix_approvals_tenant_status", table_name="approvals")
    op.drop_index("ix_approvals_task", table_name="approvals")
    op.drop_table("approvals")
    op.drop_column("tenants", "approvals")
