"""tenant secrets, MCP servers, task todos, tenants' network allow-lists, files given to tasks

Revision ID: d4b8e2f6a913
Revises: a3f9c1d7e5b2
Create Date: 2026-11-23 21:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "d4b8e2f6a913"
down_revision: str | None = "a3f9c1d7e5b2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    moment = sa.DateTime(timezone=True)
    big_key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "tenant_secrets",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("updated_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "name", name=op.f("pk_tenant_secrets")),
    )
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("headers", json_type, nullable=False),
        sa.Column("allowed_tools", json_type, nullable=True),
        sa.Column("tool_roles", json_type, nullable=False),
        sa.Column("tools", json_type, nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("status_detail", sa.Text(), nullable=True),
        sa.Column("checked_at", moment, nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("updated_at", moment, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mcp_servers")),
        sa.UniqueConstraint("tenant_id", "name", name="uq_mcp_servers_tenant_name"),
    )
    op.create_table(
        "task_todos",
        sa.Column("id", big_key, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Uuid(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("created_at", moment, nullable=False),
        sa.Column("completed_at", moment, nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_task_todos_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_todos")),
    )
    op.create_index("ix_task_todos_task", "task_todos", ["task_id", "id"], unique=False)
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("network_allow", json_type, nullable=True))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("file_ids", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("file_ids")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("network_allow")
    op.drop_index("ix_task_todos_task", table_name="task_todos")
    op.drop_table("task_todos")
    op.drop_table("mcp_servers")
    op.drop_table("tenant_secrets")
