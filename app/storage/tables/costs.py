"""What calls cost: a record per call, the daily roll-up kept past retention, and the sums
of purged records that keep reports exact."""

from sqlalchemy import (
    Boolean,
    Column,
    Date,
    ForeignKeyConstraint,
    Index,
    Integer,
    Table,
    Uuid,
)

from app.storage.tables.schema import NAME, SHORT, SLUG, TENANT_ID, metadata
from app.storage.types import BigIntegerKey, Money, UTCDateTime

cost_records = Table(
    "cost_records",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("user_id", NAME),
    Column("task_id", Uuid, nullable=False),
    Column("chain_id", Uuid, nullable=False),
    Column("step_id", Uuid, nullable=False),
    Column("correlation_id", Uuid, nullable=False),
    Column("tool_name", NAME, nullable=False),
    Column("tool_type", SHORT, nullable=False),
    Column("model", NAME),
    Column("deployment", NAME),
    Column("provider", NAME),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("cost_usd", Money),
    Column("unpriced", Boolean, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
    # The strategy (agent kind) that made the call; null for records kept before it was.
    Column("strategy", SLUG),
    # CPU seconds of a sandbox call (null for other calls).
    Column("sandbox_s", Money),
    ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
    Index("ix_cost_records_tenant_recorded", "tenant_id", "recorded_at"),
    Index("ix_cost_records_task_id", "task_id"),
)


model_usage = Table(
    "model_usage",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    Column("day", Date, primary_key=True),
    Column("model", NAME, primary_key=True),
    Column("calls", Integer, nullable=False),
    Column("input_tokens", BigIntegerKey, nullable=False),
    Column("output_tokens", BigIntegerKey, nullable=False),
    Column("cost_usd", Money, nullable=False),
    Column("unpriced_calls", Integer, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)


# The cost records of tasks the retention purge or an erasure deleted, summed per UTC day and
# what reports group by (the task aside): cost reports of any period stay exact after the
# records go. Rows are only added (one per group per deletion), never updated.
purged_costs = Table(
    "purged_costs",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("day", Date, nullable=False),
    Column("model", NAME),
    Column("tool_name", NAME, nullable=False),
    Column("tool_type", SHORT, nullable=False),
    Column("user_id", NAME),
    Column("agent_name", SLUG),
    Column("strategy", SLUG),
    Column("calls", Integer, nullable=False),
    Column("input_tokens", BigIntegerKey, nullable=False),
    Column("output_tokens", BigIntegerKey, nullable=False),
    Column("cost_usd", Money, nullable=False),
    Column("unpriced_calls", Integer, nullable=False),
    Column("sandbox_s", Money),
    Column("purged_at", UTCDateTime, nullable=False),
    Index("ix_purged_costs_tenant_day", "tenant_id", "day"),
)
