"""fenced_runs: ownership epochs of tasks, held-back failed tasks, leases judged by time

Revision ID: a1b2c3d4e5f6
Revises: f2b3c4d5e6f7
Create Date: 2026-11-27 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1b2c3d4e5f6"
down_revision: str | None = "f2b3c4d5e6f7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    moment = sa.DateTime(timezone=True)
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(
            sa.Column("owner_epoch", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(
            sa.Column("failures", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("claimable_at", moment, nullable=True))
    with op.batch_alter_table("runners") as batch:
        batch.add_column(
            sa.Column("lease_s", sa.Float(), nullable=False, server_default=sa.text("30"))
        )
        batch.add_column(sa.Column("released_at", moment, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runners") as batch:
        batch.drop_column("released_at")
        batch.drop_column("lease_s")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("claimable_at")
        batch.drop_column("failures")
        batch.drop_column("owner_epoch")
