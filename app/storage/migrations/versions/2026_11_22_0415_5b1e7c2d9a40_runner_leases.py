"""runner leases

Revision ID: 5b1e7c2d9a40
Revises: 3c29a9664fc9
Create Date: 2026-11-22 04:15:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.storage.types

revision: str = "5b1e7c2d9a40"
down_revision: str | None = "3c29a9664fc9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runners",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runners")),
    )


def downgrade() -> None:
    op.drop_table("runners")
