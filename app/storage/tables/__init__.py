"""Every table of the service, on one `MetaData`. The schema is created and changed only by
the migrations in `migrations/`; these definitions are what the queries and autogenerate use.
Each module holds the tables of one part of the service; all are importable from here."""

from app.storage.tables.costs import cost_records, model_usage, purged_costs
from app.storage.tables.resources import (
    ACTIVE_SCHEDULE,
    agent_versions,
    agents,
    conversations,
    mcp_servers,
    remote_agents,
    schedules,
)
from app.storage.tables.runs import (
    CLAIMABLE,
    PENDING_APPROVAL,
    approvals,
    idempotency_keys,
    reasoning_chains,
    reasoning_steps,
    runners,
    task_events,
    task_todos,
    tasks,
)
from app.storage.tables.schema import NAME, SHORT, SLUG, TENANT_ID, metadata
from app.storage.tables.tenancy import (
    api_keys,
    audit_deletions,
    audit_events,
    tenant_secrets,
    tenants,
)
from app.storage.tables.uploads import (
    FILE_SEARCH_COLUMN,
    FILE_SEARCH_INDEX,
    FILE_SEARCH_TABLE,
    described,
    file_blobs,
    file_texts,
    files,
)
from app.storage.tables.webhooks import (
    PENDING_DELIVERY,
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_task_secrets,
)
from app.storage.tables.workspaces import workspace_snapshots

__all__ = [
    "ACTIVE_SCHEDULE",
    "CLAIMABLE",
    "FILE_SEARCH_COLUMN",
    "FILE_SEARCH_INDEX",
    "FILE_SEARCH_TABLE",
    "NAME",
    "PENDING_APPROVAL",
    "PENDING_DELIVERY",
    "SHORT",
    "SLUG",
    "TENANT_ID",
    "agent_versions",
    "agents",
    "api_keys",
    "approvals",
    "audit_deletions",
    "audit_events",
    "conversations",
    "cost_records",
    "described",
    "file_blobs",
    "file_texts",
    "files",
    "idempotency_keys",
    "mcp_servers",
    "metadata",
    "model_usage",
    "purged_costs",
    "reasoning_chains",
    "reasoning_steps",
    "remote_agents",
    "runners",
    "schedules",
    "task_events",
    "task_todos",
    "tasks",
    "tenant_secrets",
    "tenants",
    "webhook_attempts",
    "webhook_deliveries",
    "webhook_endpoints",
    "webhook_task_secrets",
    "workspace_snapshots",
]
