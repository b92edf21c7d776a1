"""Every table of the service. The schema is created and changed only by the migrations in
`migrations/`; these definitions are what the queries and autogenerate use."""

from sqlalchemy import (
    Boolean,
    Column,
    Date,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
)

from app.storage.types import BigIntegerKey, JSONDocument, Money, UTCDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TENANT_ID = String(64)
SHORT = String(32)
NAME = String(255)
SLUG = String(64)

tenants = Table(
    "tenants",
    metadata,
    Column("id", TENANT_ID, primary_key=True),
    Column("name", NAME, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("quotas", JSONDocument, nullable=False),
    Column("default_budget", JSONDocument, nullable=False),
    Column("models", JSONDocument, nullable=False),
    Column("visibility", JSONDocument, nullable=False),
    # The tools this tenant's runs may use; NULL: every registered tool.
    Column("enabled_tools", JSONDocument),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

tasks = Table(
    "tasks",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("user_id", NAME, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("chain_id", Uuid, nullable=False, unique=True),
    Column("request", JSONDocument, nullable=False),
    Column("model", NAME, nullable=False),
    # The task's effective budget (its own limits over its tenant's defaults); NULL: none.
    Column("budget", JSONDocument),
    Column("final_answer", Text),
    Column("error_code", SHORT),
    Column("error_message", Text),
    # The last event sequence number written; recovery appends after it.
    Column("last_seq", Integer, nullable=False),
    Column("runner_id", NAME),
    # The agent (definition name and version) the task ran; NULL on tasks from before agents.
    Column("agent_name", SLUG),
    Column("agent_version", Integer),
    # The conversation it is a turn of (its number there), if any.
    Column("conversation_id", Uuid),
    Column("turn", Integer),
    # The final answer as JSON, when the agent has a `response_format`.
    Column("output", JSONDocument),
    # The limit that stopped an `incomplete` task.
    Column("stop_reason", String(64)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Index("ix_tasks_tenant_created", "tenant_id", "created_at", "id"),
    Index("ix_tasks_status", "status"),
    Index("ix_tasks_tenant_status", "tenant_id", "status"),
    Index("ix_tasks_conversation_turn", "conversation_id", "turn", unique=True),
)

# An agent definition: its name in the tenant and its newest version. Versions are immutable
# rows of `agent_versions`; archiving keeps them (old tasks keep pointing at theirs).
agents = Table(
    "agents",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", SLUG, nullable=False),
    Column("latest_version", Integer, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("archived_at", UTCDateTime),
    UniqueConstraint("tenant_id", "name", name="uq_agents_tenant_name"),
)

agent_versions = Table(
    "agent_versions",
    metadata,
    Column("agent_id", Uuid, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    # The whole definition of this version (everything but its name).
    Column("definition", JSONDocument, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# A conversation: its turns are the tasks naming it, numbered from 1.
conversations = Table(
    "conversations",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("user_id", NAME, nullable=False),
    Column("agent_name", SLUG, nullable=False),
    # Pinned version; NULL: each turn runs the agent's newest version.
    Column("agent_version", Integer),
    Column("metadata", JSONDocument, nullable=False),
    Column("turns", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_conversations_tenant_created", "tenant_id", "created_at", "id"),
)

reasoning_chains = Table(
    "reasoning_chains",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("task_id", Uuid, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("agent_id", NAME, nullable=False),
    Column("parent_chain_id", Uuid, ForeignKey("reasoning_chains.id")),
    Column("status", SHORT, nullable=False),
    Column("metrics", JSONDocument, nullable=False),
    Column("error_code", SHORT),
    Column("error_message", Text),
    Column("started_at", UTCDateTime, nullable=False),
    Column("completed_at", UTCDateTime),
    Index("ix_reasoning_chains_task_id", "task_id"),
    Index("ix_reasoning_chains_tenant_started", "tenant_id", "started_at", "id"),
)

# One row per step, stored once with everything; readers' views are computed on the way out.
reasoning_steps = Table(
    "reasoning_steps",
    metadata,
    Column(
        "chain_id",
        Uuid,
        ForeignKey("reasoning_chains.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("step_number", Integer, primary_key=True),
    Column("id", Uuid, nullable=False, unique=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    # The task stream's event sequence number of this step's `reasoning_step` event.
    Column("seq", Integer, nullable=False),
    Column("type", SHORT, nullable=False),
    # The tool of a tool_call step, and of a tool_result step (its call's tool): what the
    # visibility filter decides by, without decoding the step.
    Column("tool_type", SHORT),
    Column("tool_name", NAME),
    Column("visibility", SHORT, nullable=False),
    Column("timestamp", UTCDateTime, nullable=False),
    Column("data", JSONDocument, nullable=False),
    # The chain's running totals right after this step (the event's `metrics`).
    Column("metrics", JSONDocument, nullable=False),
)

# The stream's other events (chain_started, task_status, chain_completed, ...), so that a
# replay yields exactly what live subscribers saw, gap-free.
task_events = Table(
    "task_events",
    metadata,
    Column("task_id", Uuid, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("type", SHORT, nullable=False),
    Column("data", JSONDocument, nullable=False),
)

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

# Append-only: triggers (see the migration) refuse UPDATE and DELETE on every backend.
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("actor", NAME, nullable=False),
    Column("action", String(64), nullable=False),
    Column("resource_type", SHORT, nullable=False),
    Column("resource_id", NAME),
    Column("details", JSONDocument, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_audit_events_tenant_created", "tenant_id", "created_at"),
    Index("ix_audit_events_tenant_id", "tenant_id", "id"),
)

# The processes that run tasks. A runner renews `heartbeat_at`; the runs of a runner whose
# lease lapsed (or whose process is gone from this host) are ended as `interrupted`.
runners = Table(
    "runners",
    metadata,
    Column("id", NAME, primary_key=True),
    Column("hostname", NAME, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("heartbeat_at", UTCDateTime, nullable=False),
)
