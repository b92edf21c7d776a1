"""sandbox_seconds: the CPU seconds of each sandbox call on its cost record, and in the sums
of purged calls

Revision ID: e0f1a2b3c4d5
Revises: d9e0f1a2b3c4
Create Date: 2026-11-29 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e0f1a2b3c4d5"
down_revision: str | None = "d9e0f1a2b3c4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("cost_records", "purged_costs")
# Exact decimals, as money is kept (SQLite: as text).
_SECONDS = sa.Numeric(24, 12).with_variant(sa.String(48), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMNs of a nullable column: no table copy, no rewrite on either database.
    for table in _TABLES:
        op.add_column(table, sa.Column("sandbox_s", _SECONDS, nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("sandbox_s")
