"""api_keys: a tenant's bearer secrets for scripts and services, stored hashed

Revision ID: 9a2d6e4c8b17
Revises: 5f0c3b7a9e14
Create Date: 2026-11-24 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "9a2d6e4c8b17"
down_revision: str | None = "5f0c3b7a9e14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("roles", json_type, nullable=False),
        sa.Column("quotas", json_type, nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("expires_at", moment, nullable=True),
        sa.Column("last_used_at", moment, nullable=True),
        sa.Column("revoked_at", moment, nullable=True),
        sa.Column("revoked_by", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
        sa.UniqueConstraint("secret_sha256", name=op.f("uq_api_keys_secret_sha256")),
    )
    op.create_index(
        "ix_api_keys_tenant_created", "api_keys", ["tenant_id", "created_at", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_api_keys_tenant_created", table_name="api_keys")
    op.drop_table("api_keys")
