"""file_visibility: who may read a file, its uploader alone (`private`) or the whole tenant

Files stored before keep the reach they had (`tenant`); new uploads are private unless their
uploader shares them.

Revision ID: c8d9e0f1a2b3
Revises: b7c8d9e0f1a2
Create Date: 2026-11-27 20:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c8d9e0f1a2b3"
down_revision: str | None = "b7c8d9e0f1a2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table copy on SQLite, whose search triggers hang on file_texts).
    op.add_column(
        "files",
        sa.Column("visibility", sa.String(16), nullable=False, server_default=sa.text("'tenant'")),
    )


def downgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.drop_column("visibility")
