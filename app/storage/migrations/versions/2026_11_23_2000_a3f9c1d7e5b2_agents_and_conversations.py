"""agent definitions and their versions, conversations, and what a task ran and gave

Revision ID: a3f9c1d7e5b2
Revises: c7e2a9d4b610
Create Date: 2026-11-23 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "a3f9c1d7e5b2"
down_revision: str | None = "c7e2a9d4b610"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    op.create_table(
        "agents",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.Column("archived_at", moment, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("tenant_id", "name", name="uq_agents_tenant_name"),
    )
    op.create_table(
        "agent_versions",
        sa.Column("agent_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("definition", json_type, nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_versions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "version", name=op.f("pk_agent_versions")),
    )
    op.create_table(
        "conversations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("agent_name", sa.String(length=64), nullable=False),
        sa.Column("agent_version", sa.Integer(), nullable=True),
        sa.Column("metadata", json_type, nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversations")),
    )
    op.create_index(
        "ix_conversations_tenant_created",
        "conversations",
        ["tenant_id", "created_at", "id"],
        unique=False,
    )
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("agent_name", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("agent_version", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("conversation_id", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("turn", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output", json_type, nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.String(length=64), nullable=True))
    op.create_index("ix_tasks_conversation_turn", "tasks", ["conversation_id", "turn"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_tasks_conversation_turn", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        for column in ("stop_reason", "output", "turn", "conversation_id", "agent_version"):
            batch.drop_column(column)
        batch.drop_column("agent_name")
    op.drop_index("ix_conversations_tenant_created", table_name="conversations")
    op.drop_table("conversations")
    op.drop_table("agent_versions")
    op.drop_table("agents")
