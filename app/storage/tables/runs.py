"""A task and what its run records: its chain and steps, its stream's other events, the
approvals its calls wait for, its todo list, the idempotency key that made it, and the
runners that own runs under a lease."""

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    Uuid,
    text,
)

from app.storage.tables.schema import NAME, SHORT, SLUG, TENANT_ID, metadata
from app.storage.types import BigIntegerKey, JSONDocument, UTCDateTime

CLAIMABLE = "runner_id IS NULL AND status IN ('submitted', 'working') AND parent_task_id IS NULL"
"""A task in the queue: no instance owns it, and it is new (`submitted`) or to be resumed. A
sub-agent's task never is: it runs where its parent runs, which starts (or resumes) it."""


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
