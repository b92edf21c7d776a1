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
    FILE_UPLOAD = "file.upload"
    FILE_DELETE = "file.delete"
    SECRET_PUT = "secret.put"
    SECRET_DELETE = "secret.delete"
    API_KEY_CREATE = "api_key.create"
    API_KEY_REVOKE = "api_key.revoke"
    APPROVALS_UPDATE = "tenant.approvals.update"
    APPROVAL_DECIDE = "approval.decide"
    # Nobody decided in time: denied by the service.
    APPROVAL_EXPIRE = "approval.expire"


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
