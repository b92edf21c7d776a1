"""conversations.file_ids: the files every turn of a conversation may read

Revision ID: 5f0c3b7a9e14
Revises: ec8c175d4bad
Create Date: 2026-11-24 09:00:00.000000

A conversation starts with the files it was given; each turn adds its own, so a file given
in one turn stays readable in the later ones.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "5f0c3b7a9e14"
down_revision: str | None = "ec8c175d4bad"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("file_ids", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("file_ids")
