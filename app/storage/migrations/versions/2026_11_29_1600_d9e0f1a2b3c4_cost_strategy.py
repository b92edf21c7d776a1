"""cost_strategy: the strategy (agent kind) that made each billed call, so cost reports can
group by it; the sums of purged calls keep it too

Calls recorded before have none (null), as purged sums made before do.

Revision ID: d9e0f1a2b3c4
Revises: c8d9e0f1a2b3
Create Date: 2026-11-29 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d9e0f1a2b3c4"
down_revision: str | None = "c8d9e0f1a2b3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("cost_records", "purged_costs")


def upgrade() -> None:
    # Plain ADD COLUMNs of a nullable column: no table copy, no rewrite on either database.
    for table in _TABLES:
        op.add_column(table, sa.Column("strategy", sa.String(64), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("strategy")
