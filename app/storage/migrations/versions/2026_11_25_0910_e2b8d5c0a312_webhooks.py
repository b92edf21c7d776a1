"""webhooks: tenants' endpoints and the outbox of their deliveries

Revision ID: e2b8d5c0a312
Revises: e1a7c4b9d201
Create Date: 2026-11-25 09:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e2b8d5c0a312"
down_revision: str | None = "e1a7c4b9d201"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = "status = 'pending'"


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    big_key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("events", json_type, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_index(
        "ix_webhook_endpoints_tenant_created",
        "webhook_endpoints",
        ["tenant_id", "created_at", "id"],
    )
    op.create_table(
        "webhook_task_secrets",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_webhook_task_secrets")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("task_id", sa.Uuid(), nullable=True),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", moment, nullable=True),
        sa.Column("give_up_at", moment, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("delivered_at", moment, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        "ix_webhook_deliveries_tenant_endpoint",
        "webhook_deliveries",
        ["tenant_id", "endpoint_id", "created_at", "id"],
    )
    op.create_index("ix_webhook_deliveries_task", "webhook_deliveries", ["task_id"])
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text(PENDING),
        sqlite_where=sa.text(PENDING),
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("id", big_key, autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("started_at", moment, nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_attempts_delivery_id_webhook_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempts")),
    )
    op.create_index("ix_webhook_attempts_delivery", "webhook_attempts", ["delivery_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_attempts_delivery", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_task", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_tenant_endpoint", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_task_secrets")
    op.drop_index("ix_webhook_endpoints_tenant_created", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
