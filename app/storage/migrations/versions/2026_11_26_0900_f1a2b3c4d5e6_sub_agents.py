"""sub_agents: child tasks linked to the call that started them

Revision ID: f1a2b3c4d5e6
Revises: e4d0f7e2c534
Create Date: 2026-11-26 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f1a2b3c4d5e6"
down_revision: str | None = "e4d0f7e2c534"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CLAIMABLE_BEFORE = "runner_id IS NULL AND status IN ('submitted', 'working')"
# A sub-agent's task is never claimed from the queue: its parent's run starts and resumes it.
_CLAIMABLE = f"{_CLAIMABLE_BEFORE} AND parent_task_id IS NULL"


def _claimable_index(predicate: str) -> None:
    op.create_index(
        "ix_tasks_claimable",
        "tasks",
        ["created_at"],
        postgresql_where=sa.text(predicate),
        sqlite_where=sa.text(predicate),
    )


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("parent_task_id", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("parent_step_id", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("root_task_id", sa.Uuid(), nullable=True))
        batch.add_column(
            sa.Column("depth", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    op.create_index("ix_tasks_parent", "tasks", ["parent_task_id"])
    op.drop_index("ix_tasks_claimable", table_name="tasks")
    _claimable_index(_CLAIMABLE)


def downgrade() -> None:
    op.drop_index("ix_tasks_claimable", table_name="tasks")
    _claimable_index(_CLAIMABLE_BEFORE)
    op.drop_index("ix_tasks_parent", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("depth")
        batch.drop_column("root_task_id")
        batch.drop_column("parent_step_id")
        batch.drop_column("parent_task_id")
