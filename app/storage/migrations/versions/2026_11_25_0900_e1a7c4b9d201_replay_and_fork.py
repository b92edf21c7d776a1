"""replays and forks: a task's link to the task it re-runs or continues

Revision ID: e1a7c4b9d201
Revises: c3e8a1d5f2b6
Create Date: 2026-11-25 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e1a7c4b9d201"
down_revision: str | None = "c3e8a1d5f2b6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("replayed_from", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("replay_match", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("replay_report", json_type, nullable=True))
        batch.add_column(sa.Column("forked_from", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("fork_step", sa.Integer(), nullable=True))
    with op.batch_alter_table("reasoning_chains") as batch:
        batch.add_column(sa.Column("replayed_from", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("forked_from", sa.Uuid(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reasoning_chains") as batch:
        batch.drop_column("forked_from")
        batch.drop_column("replayed_from")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("fork_step")
        batch.drop_column("forked_from")
        batch.drop_column("replay_report")
        batch.drop_column("replay_match")
        batch.drop_column("replayed_from")
