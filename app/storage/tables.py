"""Every table of the service. The schema is created and changed only by the migrations in
`migrations/`; these definitions are what the queries and autogenerate use."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)

from app.storage.types import BigIntegerKey, JSONDocument, Money, UTCDateTime

CLAIMABLE = "runner_id IS NULL AND status IN ('submitted', 'working') AND parent_task_id IS NULL"
"""A task in the queue: no instance owns it, and it is new (`submitted`) or to be resumed. A
sub-agent's task never is: it runs where its parent runs, which starts (or resumes) it."""

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
    # Hosts and CIDRs its HTTP tools and MCP servers may reach past the SSRF guard; NULL: none.
    Column("network_allow", JSONDocument),
    # Which tool calls of its runs wait for a human (approval rules); NULL: none beyond the
    # tools' and agents' own.
    Column("approvals", JSONDocument),
    # Days its finished tasks, idle conversations and files (`retention_days`) and its audit
    # events (`audit_retention_days`) are kept; NULL: the platform's setting.
    Column("retention_days", Integer),
    Column("audit_retention_days", Integer),
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
    # Files given to the task (its own and its conversation's); NULL: none.
    Column("file_ids", JSONDocument),
    # Who it runs as: the submitter's roles and API key (NULL on tasks from before the queue),
    # so any instance can run or resume it with the submitter's permissions.
    Column("roles", JSONDocument),
    Column("api_key_id", Uuid),
    # A cancel requested of a run another instance owns: the owner ends it with this reason.
    Column("cancel_reason", Text),
    # How many times it was resumed after its instance stopped.
    Column("resumes", Integer, nullable=False, server_default=text("0")),
    # The fence of its run's writes: each claim takes the next epoch, and every write of a
    # run is conditional on its runner (`runner_id`) and the epoch of its claim.
    Column("owner_epoch", Integer, nullable=False, server_default=text("0")),
    # Attempts at it that failed (its run could not be started, or its end not stored), and
    # until when it is held back from the queue after one.
    Column("failures", Integer, nullable=False, server_default=text("0")),
    Column("claimable_at", UTCDateTime),
    # A replay of a recorded task (every result from its recording, `replay_match` saying what
    # must repeat) and how it went; or a fork of one (its steps up to `fork_step` as recorded).
    Column("replayed_from", Uuid),
    Column("replay_match", SHORT),
    Column("replay_report", JSONDocument),
    Column("forked_from", Uuid),
    Column("fork_step", Integer),
    # The schedule whose firing made it; NULL: submitted by a caller.
    Column("schedule_id", Uuid),
    # A sub-agent's task: the task whose call (`parent_step_id`, its tool_call step) started
    # it, its family's first task, and how deep it is in the family (0: not a sub-agent's).
    Column("parent_task_id", Uuid),
    Column("parent_step_id", Uuid),
    Column("root_task_id", Uuid),
    Column("depth", Integer, nullable=False, server_default=text("0")),
    Column("created_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Index("ix_tasks_tenant_created", "tenant_id", "created_at", "id"),
    Index("ix_tasks_parent", "parent_task_id"),
    # The queue: tasks no instance owns that one may claim (new ones, and runs to resume).
    Index(
        "ix_tasks_claimable",
        "created_at",
        postgresql_where=text(CLAIMABLE),
        sqlite_where=text(CLAIMABLE),
    ),
    Index("ix_tasks_runner", "runner_id"),
    Index("ix_tasks_status", "status"),
    Index("ix_tasks_tenant_status", "tenant_id", "status"),
    Index("ix_tasks_conversation_turn", "conversation_id", "turn", unique=True),
    Index("ix_tasks_schedule", "schedule_id", "created_at", "id"),
    # The retention purge: a tenant's tasks by when they finished.
    Index("ix_tasks_tenant_finished", "tenant_id", "finished_at"),
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
    # The files every turn may read (ids, as strings): those it started with and each
    # turn's own; NULL: none.
    Column("file_ids", JSONDocument),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_conversations_tenant_created", "tenant_id", "created_at", "id"),
    # The retention purge: a tenant's conversations by their last activity.
    Index("ix_conversations_tenant_updated", "tenant_id", "updated_at"),
)

reasoning_chains = Table(
    "reasoning_chains",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("task_id", Uuid, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("agent_id", NAME, nullable=False),
    Column("parent_chain_id", Uuid, ForeignKey("reasoning_chains.id")),
    # The chain a replay or a fork took its recorded steps from (no foreign key: erasing the
    # source keeps the copy).
    Column("replayed_from", Uuid),
    Column("forked_from", Uuid),
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

# The processes that run tasks. A runner renews `heartbeat_at` (by the database's clock); one
# that has not for `lease_s` is judged lapsed by another, which marks it `released_at` and gives
# its runs back to the queue in the same transaction (its registration is kept: its next renewal
# then fails, and it stops its runs).
runners = Table(
    "runners",
    metadata,
    Column("id", NAME, primary_key=True),
    Column("hostname", NAME, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("heartbeat_at", UTCDateTime, nullable=False),
    Column("lease_s", Float, nullable=False, server_default=text("30")),
    Column("released_at", UTCDateTime),
)

# A tenant's secrets, sealed (AES-256-GCM) under the service's key `key_id`; the value never
# leaves the service through any route.
tenant_secrets = Table(
    "tenant_secrets",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    Column("name", SLUG, primary_key=True),
    Column("key_id", SHORT, nullable=False),
    Column("sealed", Text, nullable=False),
    # Who may use it (`{"agents": [...], "roles": [...], "tools": [...], "mcp_servers":
    # [...], "remote_agents": [...]}`); NULL: every agent, tool and role of the tenant.
    Column("usable_by", JSONDocument),
    Column("created_by", NAME, nullable=False),
    Column("updated_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# A tenant's API keys: bearer secrets (`omf_…`) for scripts and services, stored as the
# SHA-256 of the secret (a 256-bit random secret needs no slow hash); `prefix` is the part
# shown in listings and audit rows.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", NAME, nullable=False),
    Column("prefix", SHORT, nullable=False, unique=True),
    Column("secret_sha256", String(64), nullable=False, unique=True),
    Column("roles", JSONDocument, nullable=False),
    # Per-key limits (`TenantQuotas`' shape), on top of the tenant's; NULL: none.
    Column("quotas", JSONDocument),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime),
    Column("last_used_at", UTCDateTime),
    Column("revoked_at", UTCDateTime),
    Column("revoked_by", NAME),
    Index("ix_api_keys_tenant_created", "tenant_id", "created_at", "id"),
)

# A tenant's remote MCP servers; their tools become the tenant's `<server>__<tool>` tools.
mcp_servers = Table(
    "mcp_servers",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", SLUG, nullable=False),
    Column("url", Text, nullable=False),
    # Header name -> text or {"secret": NAME}.
    Column("headers", JSONDocument, nullable=False),
    # The server's tools its runs may use; NULL: all it lists.
    Column("allowed_tools", JSONDocument),
    # Tool name -> roles, any one of which a caller needs to use it.
    Column("tool_roles", JSONDocument, nullable=False),
    # What the last discovery found (tool definitions) and how the server answered.
    Column("tools", JSONDocument, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("status_detail", Text),
    Column("checked_at", UTCDateTime),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("tenant_id", "name", name="uq_mcp_servers_tenant_name"),
)

# A task's todo list (the todo_* tools): rows, so it survives restarts and instances.
task_todos = Table(
    "task_todos",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("task_id", Uuid, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("text", Text, nullable=False),
    Column("done", Boolean, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("completed_at", UTCDateTime),
    Index("ix_task_todos_task", "task_id", "id"),
)

# A tenant's uploaded files: what was sniffed from their bytes (never what the client claimed).
# The bytes themselves are kept by a `FileStore` under the file's id (`file_blobs`, or a
# directory).
files = Table(
    "files",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", NAME, nullable=False),
    Column("media_type", String(127), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
    # PDFs: their page count; images: their size in pixels.
    Column("pages", Integer),
    Column("width", Integer),
    Column("height", Integer),
    # Characters of text extracted for reading and search; NULL: the file has none.
    Column("text_chars", Integer),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # Who may read it: `private`, its uploader (and those who manage the tenant's files);
    # `tenant`, every member. Files stored before it was kept are the tenant's.
    Column("visibility", String(16), nullable=False, server_default=text("'tenant'")),
    Index("ix_files_tenant_created", "tenant_id", "created_at", "id"),
)

# Files' extracted text in chunks, in order: a PDF's pages (a long page in several chunks), a
# text file's text cut at line ends. Full-text search runs over these rows with the database's
# own engine; its objects are made by the migration per backend (`SEARCH_OBJECTS`).
file_texts = Table(
    "file_texts",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("file_id", Uuid, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("tenant_id", TENANT_ID, nullable=False),
    # The PDF page (from 1) the chunk is from; NULL for text files.
    Column("page", Integer),
    Column("text", Text, nullable=False),
    Index("ix_file_texts_file", "file_id", "id"),
)

# Files' bytes when the database keeps them (`DatabaseFileStore`).
file_blobs = Table(
    "file_blobs",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

# The search objects the migration makes outside these definitions: on SQLite an FTS5 table
# (with its shadow tables), on Postgres a generated `tsvector` column of `file_texts` with a
# GIN index. Comparisons of these definitions with a database leave them out (`described`).
FILE_SEARCH_TABLE = "file_texts_fts"
FILE_SEARCH_COLUMN = "search_vector"
FILE_SEARCH_INDEX = "ix_file_texts_search"


def described(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether a database object is one these definitions describe: false for the search
    objects above (an Alembic `include_name` hook)."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(FILE_SEARCH_TABLE)
    if type_ == "column":
        return name != FILE_SEARCH_COLUMN
    return not (type_ == "index" and name == FILE_SEARCH_INDEX)


PENDING_APPROVAL = "status = 'pending'"

approvals = Table(
    "approvals",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("task_id", Uuid, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("chain_id", Uuid, nullable=False),
    # The call's `tool_call` step: a resumed run finds the decision by it.
    Column("step_id", Uuid, nullable=False),
    Column("tool_name", NAME, nullable=False),
    Column("tool_type", SHORT, nullable=False),
    # The call step's stored visibility level: readers see the arguments as they see the step.
    Column("visibility", SHORT, nullable=False),
    Column("arguments", JSONDocument, nullable=False),
    # The tool's argument schema, which edited arguments must fit.
    Column("input_schema", JSONDocument, nullable=False),
    # The batch's other calls, which wait with it (none of a batch runs before all are decided).
    Column("held_step_ids", JSONDocument, nullable=False),
    Column("note", Text),
    # Whether the task's submitter may decide (its agent allows it), besides `task:approve`.
    Column("submitter_decides", Boolean, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("decided_by", NAME),
    Column("reason", Text),
    Column("decided_arguments", JSONDocument),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("decided_at", UTCDateTime),
    # When a resumed run acted on the decision: a later resume does not act on it again.
    Column("consumed_at", UTCDateTime),
    Index("ix_approvals_task", "task_id", "created_at"),
    Index("ix_approvals_tenant_status", "tenant_id", "status", "created_at", "id"),
    Index(
        "ix_approvals_pending_expiry",
        "expires_at",
        postgresql_where=text(PENDING_APPROVAL),
        sqlite_where=text(PENDING_APPROVAL),
    ),
)

# A tenant's webhook endpoints: where its events are sent, signed with the endpoint's own
# secret (Standard Webhooks `whsec_…`), sealed like tenant secrets.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("url", Text, nullable=False),
    Column("description", Text),
    # The event types it receives (`task.completed`…).
    Column("events", JSONDocument, nullable=False),
    # A paused endpoint gets no new deliveries; those stored wait until it is enabled again.
    Column("enabled", Boolean, nullable=False),
    Column("key_id", SHORT, nullable=False),
    Column("sealed_secret", Text, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_webhook_endpoints_tenant_created", "tenant_id", "created_at", "id"),
)

# The secret that signs deliveries to the one-off `webhook_url` of a tenant's tasks, made on
# first use and readable by the tenant's admins.
webhook_task_secrets = Table(
    "webhook_task_secrets",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    Column("key_id", SHORT, nullable=False),
    Column("sealed_secret", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

PENDING_DELIVERY = "status = 'pending'"

# The outbox: one row per event and destination, stored in the transaction of the change that
# caused it, then sent (and retried) by whichever instance claims it. No foreign key to the
# endpoint: a run may still name an endpoint deleted after it started (such rows are never
# sent).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    # NULL: sent to `url`, a task's one-off `webhook_url`.
    Column("endpoint_id", Uuid),
    Column("url", Text),
    Column("task_id", Uuid),
    Column("event", SHORT, nullable=False),
    # The body exactly as sent (and signed), the same on every attempt.
    Column("payload", Text, nullable=False),
    # pending, delivered, failed.
    Column("status", SHORT, nullable=False),
    Column("attempts", Integer, nullable=False),
    # When it is next due: its next try, or the end of the claim of the instance sending it.
    Column("next_attempt_at", UTCDateTime),
    # Past this, a failed attempt is the last one; NULL: the retry window after `created_at`.
    Column("give_up_at", UTCDateTime),
    Column("last_status_code", Integer),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    Index("ix_webhook_deliveries_tenant_endpoint", "tenant_id", "endpoint_id", "created_at", "id"),
    Index("ix_webhook_deliveries_task", "task_id"),
    Index(
        "ix_webhook_deliveries_due",
        "next_attempt_at",
        postgresql_where=text(PENDING_DELIVERY),
        sqlite_where=text(PENDING_DELIVERY),
    ),
)

# Every attempt to send a delivery, as it went.
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column(
        "delivery_id",
        Uuid,
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("number", Integer, nullable=False),
    Column("url", Text, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    # The start of the receiver's answer.
    Column("response", Text),
    Index("ix_webhook_attempts_delivery", "delivery_id", "id"),
)

# Idempotency keys of task submissions: a repeat of (tenant, caller, key) within its time
# returns the task the first one made. The key row is stored in the task's own transaction,
# before the task row (hence the deferred foreign key), so a concurrent duplicate waits on
# the primary key and never makes a second task.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    # The caller's subject: one caller's key never answers with another caller's task.
    Column("principal", NAME, primary_key=True),
    Column("key", NAME, primary_key=True),
    # The canonical submission's SHA-256: the same key with another body is refused.
    Column("request_sha256", String(64), nullable=False),
    Column(
        "task_id",
        Uuid,
        ForeignKey("tasks.id", ondelete="CASCADE", deferrable=True, initially="DEFERRED"),
        nullable=False,
    ),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("ix_idempotency_keys_task", "task_id"),
)

ACTIVE_SCHEDULE = "status = 'active'"

# A tenant's scheduled runs: each firing submits `request` (a task) to `agent` as its creator,
# with the roles (and API key) it had when it made the schedule. Paused ones have no
# `next_fire_at`.
schedules = Table(
    "schedules",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", NAME, nullable=False),
    # `name` or `name@N`; NULL: the built-in default agent.
    Column("agent", NAME),
    Column("request", JSONDocument, nullable=False),
    Column("cron", NAME, nullable=False),
    Column("timezone", SLUG, nullable=False),
    Column("status", SHORT, nullable=False),
    Column("next_fire_at", UTCDateTime),
    Column("created_by", NAME, nullable=False),
    Column("roles", JSONDocument, nullable=False),
    Column("api_key_id", Uuid),
    Column("fired_count", Integer, nullable=False),
    Column("skipped_count", Integer, nullable=False),
    Column("last_fired_at", UTCDateTime),
    Column("last_task_id", Uuid),
    Column("last_skipped_at", UTCDateTime),
    # Why its last firing made no task (a refused submission), and when.
    Column("last_error", Text),
    Column("last_error_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_schedules_tenant_created", "tenant_id", "created_at", "id"),
    Index(
        "ix_schedules_due",
        "next_fire_at",
        postgresql_where=text(ACTIVE_SCHEDULE),
        sqlite_where=text(ACTIVE_SCHEDULE),
    ),
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
    Column("calls", Integer, nullable=False),
    Column("input_tokens", BigIntegerKey, nullable=False),
    Column("output_tokens", BigIntegerKey, nullable=False),
    Column("cost_usd", Money, nullable=False),
    Column("unpriced_calls", Integer, nullable=False),
    Column("purged_at", UTCDateTime, nullable=False),
    Index("ix_purged_costs_tenant_day", "tenant_id", "day"),
)

# Deletions of audit events under way. The append-only triggers of `audit_events` let a
# DELETE through only for a row of the tenant named here that was created before `before`
# (the purge, past the tenant's audit retention) or is about task `task_id` (an erasure). A
# row lives only inside the transaction that deletes with it: made first, removed last.
audit_deletions = Table(
    "audit_deletions",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("before", UTCDateTime),
    Column("task_id", String(36)),
)

# A tenant's remote A2A agents, registered by their agent card's URL; each skill of the card
# (as last fetched) becomes the tenant's tool `<name>__<skill>` of type `sub_agent`.
remote_agents = Table(
    "remote_agents",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", SLUG, nullable=False),
    Column("card_url", Text, nullable=False),
    # Header name -> text or {"secret": NAME, "prefix": TEXT}, sent with every request.
    Column("headers", JSONDocument, nullable=False),
    # The agent card as last fetched (A2A's JSON form) and when.
    Column("card", JSONDocument, nullable=False),
    Column("fetched_at", UTCDateTime, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("tenant_id", "name", name="uq_remote_agents_tenant_name"),
)
