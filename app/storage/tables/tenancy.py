"""The tenants, and what acts or is kept for each: API keys, sealed secrets, and the
append-only audit trail with the deletions it lets through."""

from sqlalchemy import (
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    Uuid,
)

from app.storage.tables.schema import NAME, SHORT, SLUG, TENANT_ID, metadata
from app.storage.types import BigIntegerKey, JSONDocument, UTCDateTime

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
