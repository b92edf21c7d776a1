"""tasks' effective budgets; unfinished tasks counted per tenant

Revision ID: c7e2a9d4b610
Revises: 8d4f1a6b3e21
Create Date: 2026-11-22 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c7e2a9d4b610"
down_revision: str | None = "8d4f1a6b3e21"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("budget", json_type, nullable=True))
    # Concurrent-run quotas count a tenant's unfinished tasks at every submission.
    op.create_index("ix_tasks_tenant_status", "tasks", ["tenant_id", "status"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_tasks_tenant_status", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("budget")
