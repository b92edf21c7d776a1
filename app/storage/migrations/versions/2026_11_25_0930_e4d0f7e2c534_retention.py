"""retention: tenants' retention periods, the purge's own deletions of expired audit rows

Revision ID: e4d0f7e2c534
Revises: e3c9e6d1b423
Create Date: 2026-11-25 09:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e4d0f7e2c534"
down_revision: str | None = "e3c9e6d1b423"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REFUSAL = "audit_events is append-only"
_BIG_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_MONEY = sa.Numeric(24, 12).with_variant(sa.String(48), "sqlite")

# A row may go only while a row of `audit_deletions` made by the deleting transaction itself
# names it: of its tenant, and older than `before` or about the task `task_id`. UPDATE and
# TRUNCATE stay refused.
_POSTGRES_GUARD = f"""
CREATE OR REPLACE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM audit_deletions AS d
        WHERE d.tenant_id = OLD.tenant_id
          AND (OLD.created_at < d.before OR OLD.details ->> 'task_id' = d.task_id)
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '{_REFUSAL}';
END $$
"""
_POSTGRES_ORIGINAL = (
    "CREATE OR REPLACE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    f"$$ BEGIN RAISE EXCEPTION '{_REFUSAL}'; END $$"
)
# SQLite has no session settings, hence the table: SQLite runs one writing transaction at a
# time, so no other transaction ever sees a deletion's row. Its datetimes are stored as
# ISO text in UTC, which compares in time order.
_SQLITE_GUARD = f"""
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
WHEN NOT EXISTS (
    SELECT 1 FROM audit_deletions AS d
    WHERE d.tenant_id = OLD.tenant_id
      AND (OLD.created_at < d.before OR json_extract(OLD.details, '$.task_id') = d.task_id)
)
BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END
"""
_SQLITE_ORIGINAL = (
    "CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
    f"BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END"
)


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("retention_days", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("audit_retention_days", sa.Integer(), nullable=True))
    op.create_index("ix_tasks_tenant_finished", "tasks", ["tenant_id", "finished_at"])
    op.create_index("ix_conversations_tenant_updated", "conversations", ["tenant_id", "updated_at"])
    op.create_table(
        "purged_costs",
        sa.Column("id", _BIG_KEY, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=True),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("tool_type", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column("agent_name", sa.String(length=64), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", _BIG_KEY, nullable=False),
        sa.Column("output_tokens", _BIG_KEY, nullable=False),
        sa.Column("cost_usd", _MONEY, nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.Column("purged_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_purged_costs")),
    )
    op.create_index("ix_purged_costs_tenant_day", "purged_costs", ["tenant_id", "day"])
    op.create_table(
        "audit_deletions",
        sa.Column("id", _BIG_KEY, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("task_id", sa.String(length=36), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_deletions")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_GUARD)
    else:
        op.execute("DROP TRIGGER audit_events_no_delete")
        op.execute(_SQLITE_GUARD)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_ORIGINAL)
    else:
        op.execute("DROP TRIGGER audit_events_no_delete")
        op.execute(_SQLITE_ORIGINAL)
    op.drop_table("audit_deletions")
    op.drop_index("ix_purged_costs_tenant_day", table_name="purged_costs")
    op.drop_table("purged_costs")
    op.drop_index("ix_conversations_tenant_updated", table_name="conversations")
    op.drop_index("ix_tasks_tenant_finished", table_name="tasks")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("audit_retention_days")
        batch.drop_column("retention_days")
