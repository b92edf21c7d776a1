"""A tenant's resources that its tasks run with: agent definitions and their versions,
conversations, MCP servers, remote A2A agents and schedules."""

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)

from app.storage.tables.schema import NAME, SHORT, SLUG, TENANT_ID, metadata
from app.storage.types import JSONDocument, UTCDateTime

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
