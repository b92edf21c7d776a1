"""remote_agents: tenants' remote A2A agents, called as tools

Revision ID: f2b3c4d5e6f7
Revises: f1a2b3c4d5e6
Create Date: 2026-11-26 09:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f2b3c4d5e6f7"
down_revision: str | None = "f1a2b3c4d5e6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    op.create_table(
        "remote_agents",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("card_url", sa.Text(), nullable=False),
        sa.Column("headers", json_type, nullable=False),
        sa.Column("card", json_type, nullable=False),
        sa.Column("fetched_at", moment, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remote_agents")),
        sa.UniqueConstraint("tenant_id", "name", name="uq_remote_agents_tenant_name"),
    )


def downgrade() -> None:
    op.drop_table("remote_agents")
