"""What the audit log records, and in what shape."""

from datetime import datetime
from enum import StrEnum
from typing import Any


class AuditAction(StrEnum):
    TOOL_EXECUTE = "tool.execute"
    TENANT_CREATE = "tenant.create"
    TENANT_UPDATE = "tenant.update"
    VISIBILITY_UPDATE = "tenant.visibility.update"
    TOOLS_UPDATE = "tenant.tools.update"
    QUOTAS_UPDATE = "tenant.quotas.update"
    MODELS_UPDATE = "tenant.models.update"
    NETWORK_UPDATE = "tenant.network.update"
    CHAIN_READ = "chain.read"
    CHAIN_EXPORT = "chain.export"
    CHAIN_STREAM = "chain.stream"
    AGENT_CREATE = "agent.create"
    AGENT_UPDATE = "agent.update"
    AGENT_ARCHIVE = "agent.archive"
    MCP_SERVER_CREATE = "mcp_server.create"
    MCP_SERVER_UPDATE = "mcp_server.update"
    MCP_SERVER_DELETE = "mcp_server.delete"
    REMOTE_AGENT_CREATE = "remote_agent.create"
    REMOTE_AGENT_UPDATE = "remote_agent.update"
    REMOTE_AGENT_DELETE = "remote_agent.delete"
    WEBHOOK_CREATE = "webhook.create"
    WEBHOOK_UPDATE = "webhook.update"
    WEBHOOK_DELETE = "webhook.delete"
    WEBHOOK_ROTATE = "webhook.rotate_secret"
    WEBHOOK_REDELIVER = "webhook.redeliver"
    FILE_UPLOAD = "file.upload"
    FILE_DELETE = "file.delete"
    FILE_UPDATE = "file.update"
    SECRET_PUT = "secret.put"
    SECRET_DELETE = "secret.delete"
    SECRET_SCOPE = "secret.scope"
    # A run's use of a secret (or its refusal): by the run's caller, through what, for what.
    SECRET_USE = "secret.use"
    API_KEY_CREATE = "api_key.create"
    API_KEY_REVOKE = "api_key.revoke"
    APPROVALS_UPDATE = "tenant.approvals.update"
    APPROVAL_DECIDE = "approval.decide"
    # Nobody decided in time: denied by the service.
    APPROVAL_EXPIRE = "approval.expire"
    SCHEDULE_CREATE = "schedule.create"
    SCHEDULE_UPDATE = "schedule.update"
    SCHEDULE_DELETE = "schedule.delete"
    RETENTION_UPDATE = "tenant.retention.update"
    # What the retention purge deleted of a tenant in one run (counts, no content).
    RETENTION_PURGE = "retention.purge"
    # A task or conversation erased at a caller's request: who, which ids, no content.
    TASK_ERASE = "task.erase"
    CONVERSATION_ERASE = "conversation.erase"


def audit_row(
    *,
    actor: str,
    action: AuditAction,
    resource_type: str,
    resource_id: str | None,
    details: dict[str, Any],
    at: datetime,
) -> dict[str, Any]:
    """An `audit_events` row, its tenant set by the repository that appends it."""
    return {
        "actor": actor,
        "action": action.value,
        "resource_type": resource_type,
        "resource_id": resource_id,
        "details": details,
        "created_at": at,
    }
