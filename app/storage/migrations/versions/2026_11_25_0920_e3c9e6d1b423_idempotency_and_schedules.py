"""idempotent submissions and scheduled runs

Revision ID: e3c9e6d1b423
Revises: e2b8d5c0a312
Create Date: 2026-11-25 09:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e3c9e6d1b423"
down_revision: str | None = "e2b8d5c0a312"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE = "status = 'active'"


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("principal", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("expires_at", moment, nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_idempotency_keys_task_id_tasks"),
            ondelete="CASCADE",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "principal", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index("ix_idempotency_keys_task", "idempotency_keys", ["task_id"])
    op.create_table(
        "schedules",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=True),
        sa.Column("request", json_type, nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("next_fire_at", moment, nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("roles", json_type, nullable=False),
        sa.Column("api_key_id", sa.Uuid(), nullable=True),
        sa.Column("fired_count", sa.Integer(), nullable=False),
        sa.Column("skipped_count", sa.Integer(), nullable=False),
        sa.Column("last_fired_at", moment, nullable=True),
        sa.Column("last_task_id", sa.Uuid(), nullable=True),
        sa.Column("last_skipped_at", moment, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", moment, nullable=True),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    op.create_index("ix_schedules_tenant_created", "schedules", ["tenant_id", "created_at", "id"])
    op.create_index(
        "ix_schedules_due",
        "schedules",
        ["next_fire_at"],
        postgresql_where=sa.text(ACTIVE),
        sqlite_where=sa.text(ACTIVE),
    )
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("schedule_id", sa.Uuid(), nullable=True))
    op.create_index("ix_tasks_schedule", "tasks", ["schedule_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_tasks_schedule", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("schedule_id")
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.drop_index("ix_schedules_tenant_created", table_name="schedules")
    op.drop_table("schedules")
    op.drop_index("ix_idempotency_keys_task", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
