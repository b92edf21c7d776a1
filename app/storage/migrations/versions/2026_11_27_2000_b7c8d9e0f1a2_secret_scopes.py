"""secret_scopes: who may use each tenant secret (its agents, tools and roles)

Revision ID: b7c8d9e0f1a2
Revises: a1b2c3d4e5f6
Create Date: 2026-11-27 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b7c8d9e0f1a2"
down_revision: str | None = "a1b2c3d4e5f6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    # NULL: usable by every agent, tool and role of the tenant (as every secret was before).
    with op.batch_alter_table("tenant_secrets") as batch:
        batch.add_column(sa.Column("usable_by", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenant_secrets") as batch:
        batch.drop_column("usable_by")
