"""task queue: who a task runs as, cancel requests, resumes, and the claim index

Revision ID: b6e1f0a2c3d4
Revises: 9a2d6e4c8b17
Create Date: 2026-11-24 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b6e1f0a2c3d4"
down_revision: str | None = "9a2d6e4c8b17"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIMABLE = "runner_id IS NULL AND status IN ('submitted', 'working')"


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("roles", json_type, nullable=True))
        batch.add_column(sa.Column("api_key_id", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("cancel_reason", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("resumes", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
    op.create_index(
        "ix_tasks_claimable",
        "tasks",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text(CLAIMABLE),
        sqlite_where=sa.text(CLAIMABLE),
    )
    op.create_index("ix_tasks_runner", "tasks", ["runner_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_tasks_runner", table_name="tasks")
    op.drop_index("ix_tasks_claimable", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("resumes")
        batch.drop_column("cancel_reason")
        batch.drop_column("api_key_id")
        batch.drop_column("roles")
