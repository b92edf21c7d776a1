"""tenants' enabled tools, the tool of every tool step, an append-only audit log

Revision ID: 8d4f1a6b3e21
Revises: 5b1e7c2d9a40
Create Date: 2026-11-22 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "8d4f1a6b3e21"
down_revision: str | None = "5b1e7c2d9a40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REFUSAL = "audit_events is append-only"


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("enabled_tools", json_type, nullable=True))
    with op.batch_alter_table("reasoning_steps") as batch:
        batch.add_column(sa.Column("tool_type", sa.String(length=32), nullable=True))
    op.create_index("ix_audit_events_tenant_id", "audit_events", ["tenant_id", "id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{_REFUSAL}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
            "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()"
        )
        # TRUNCATE bypasses row triggers.
        op.execute(
            "CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()"
        )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_events_no_{event.lower()} BEFORE {event} ON audit_events "
                f"BEGIN SELECT RAISE(ABORT, '{_REFUSAL}'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_events_no_truncate ON audit_events")
        op.execute("DROP TRIGGER audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION audit_events_append_only()")
    else:
        op.execute("DROP TRIGGER audit_events_no_update")
        op.execute("DROP TRIGGER audit_events_no_delete")
    op.drop_index("ix_audit_events_tenant_id", table_name="audit_events")
    with op.batch_alter_table("reasoning_steps") as batch:
        batch.drop_column("tool_type")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("enabled_tools")
