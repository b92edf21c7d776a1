"""initial schema

Revision ID: 3c29a9664fc9
Revises:
Create Date: 2026-11-22 03:25:29.770673
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import app.storage.types

revision: str = "3c29a9664fc9"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("resource_type", sa.String(length=32), nullable=False),
        sa.Column("resource_id", sa.String(length=255), nullable=True),
        sa.Column(
            "details",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(
        "ix_audit_events_tenant_created", "audit_events", ["tenant_id", "created_at"], unique=False
    )
    op.create_table(
        "model_usage",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column(
            "input_tokens", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "output_tokens", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "cost_usd",
            sa.Numeric(precision=24, scale=12).with_variant(
                app.storage.types.DecimalText(length=48), "sqlite"
            ),
            nullable=False,
        ),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
        sa.Column("updated_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "day", "model", name=op.f("pk_model_usage")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("chain_id", sa.Uuid(), nullable=False),
        sa.Column(
            "request",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("final_answer", sa.Text(), nullable=True),
        sa.Column("error_code", sa.String(length=32), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("runner_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", app.storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", app.storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("chain_id", name=op.f("uq_tasks_chain_id")),
    )
    op.create_index("ix_tasks_status", "tasks", ["status"], unique=False)
    op.create_index(
        "ix_tasks_tenant_created", "tasks", ["tenant_id", "created_at", "id"], unique=False
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column(
            "quotas",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "default_budget",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "models",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "visibility",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
    )
    op.create_table(
        "cost_records",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("chain_id", sa.Uuid(), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=False),
        sa.Column("correlation_id", sa.Uuid(), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("tool_type", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=True),
        sa.Column("deployment", sa.String(length=255), nullable=True),
        sa.Column("provider", sa.String(length=255), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column(
            "cost_usd",
            sa.Numeric(precision=24, scale=12).with_variant(
                app.storage.types.DecimalText(length=48), "sqlite"
            ),
            nullable=True,
        ),
        sa.Column("unpriced", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_cost_records_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cost_records")),
    )
    op.create_index("ix_cost_records_task_id", "cost_records", ["task_id"], unique=False)
    op.create_index(
        "ix_cost_records_tenant_recorded",
        "cost_records",
        ["tenant_id", "recorded_at"],
        unique=False,
    )
    op.create_table(
        "reasoning_chains",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=255), nullable=False),
        sa.Column("parent_chain_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column(
            "metrics",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("error_code", sa.String(length=32), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("started_at", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", app.storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["parent_chain_id"],
            ["reasoning_chains.id"],
            name=op.f("fk_reasoning_chains_parent_chain_id_reasoning_chains"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_reasoning_chains_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reasoning_chains")),
    )
    op.create_index("ix_reasoning_chains_task_id", "reasoning_chains", ["task_id"], unique=False)
    op.create_index(
        "ix_reasoning_chains_tenant_started",
        "reasoning_chains",
        ["tenant_id", "started_at", "id"],
        unique=False,
    )
    op.create_table(
        "task_events",
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_task_events_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("task_id", "seq", name=op.f("pk_task_events")),
    )
    op.create_table(
        "reasoning_steps",
        sa.Column("chain_id", sa.Uuid(), nullable=False),
        sa.Column("step_number", sa.Integer(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=True),
        sa.Column("visibility", sa.String(length=32), nullable=False),
        sa.Column("timestamp", app.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "metrics",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["chain_id"],
            ["reasoning_chains.id"],
            name=op.f("fk_reasoning_steps_chain_id_reasoning_chains"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chain_id", "step_number", name=op.f("pk_reasoning_steps")),
        sa.UniqueConstraint("id", name=op.f("uq_reasoning_steps_id")),
    )


def downgrade() -> None:

    op.drop_table("reasoning_steps")
    op.drop_table("task_events")
    op.drop_index("ix_reasoning_chains_tenant_started", table_name="reasoning_chains")
    op.drop_index("ix_reasoning_chains_task_id", table_name="reasoning_chains")
    op.drop_table("reasoning_chains")
    op.drop_index("ix_cost_records_tenant_recorded", table_name="cost_records")
    op.drop_index("ix_cost_records_task_id", table_name="cost_records")
    op.drop_table("cost_records")
    op.drop_table("tenants")
    op.drop_index("ix_tasks_tenant_created", table_name="tasks")
    op.drop_index("ix_tasks_status", table_name="tasks")
    op.drop_table("tasks")
    op.drop_table("model_usage")
    op.drop_index("ix_audit_events_tenant_created", table_name="audit_events")
    op.drop_table("audit_events")
