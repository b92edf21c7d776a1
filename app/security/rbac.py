"""Roles and what they permit. A caller's permissions are the union of its roles'; roles this
service does not know grant nothing."""

from collections.abc import Iterable
from enum import StrEnum


class Permission(StrEnum):
    TASK_CREATE = "task:create"
    TASK_READ = "task:read"
    TASK_CANCEL = "task:cancel"
    # Decide on tool calls that wait for a human (tenant admins; a task's submitter too where
    # its agent allows it).
    TASK_APPROVE = "task:approve"
    # Erase a task or conversation with everything about it (tenant admins: an erasure is a
    # data-protection request of the tenant, and a member's own runs are audit evidence).
    TASK_DELETE = "task:delete"
    CHAIN_READ = "chain:read"
    CHAIN_READ_FULL = "chain:read_full"
    CHAIN_EXPORT = "chain:export"
    TOOL_EXECUTE = "tool:execute"
    TOOL_CONFIGURE = "tool:configure"
    RATE_LIMIT_CONFIGURE = "rate_limit:configure"
    COST_VIEW = "cost:view"
    COST_CONFIGURE = "cost:configure"
    TENANT_MANAGE = "tenant:manage"
    AUDIT_READ = "audit:read"
    AGENT_CONFIGURE = "agent:configure"
    SECRET_CONFIGURE = "secret:configure"
    FILE_READ = "file:read"
    FILE_WRITE = "file:write"
    # Read, share and delete any file of the tenant, members' private ones included (tenant
    # admins); members delete and share their own.
    FILE_MANAGE = "file:manage"
    API_KEY_CONFIGURE = "api_key:configure"
    # Webhook endpoints, their secrets and deliveries (tenant admins).
    WEBHOOK_CONFIGURE = "webhook:configure"
    # Schedules: reading them, and making, changing, pausing and deleting them (members their
    # own, tenant admins any).
    SCHEDULE_READ = "schedule:read"
    SCHEDULE_MANAGE = "schedule:manage"


class Role(StrEnum):
    PLATFORM_ADMIN = "platform_admin"
    TENANT_ADMIN = "tenant_admin"
    MEMBER = "member"
    VIEWER = "viewer"
    AUDITOR = "auditor"


P = Permission

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    # Everything, in every tenant (see `crosses_tenants`).
    Role.PLATFORM_ADMIN: frozenset(Permission),
    # Everything within its own tenant.
    Role.TENANT_ADMIN: frozenset(Permission),
    # Runs tasks and reads chains as the tenant's visibility settings show them.
    # Uploads the files its tasks work on.
    Role.MEMBER: frozenset(
        {
            P.TASK_CREATE,
            P.TASK_READ,
            P.TASK_CANCEL,
            P.CHAIN_READ,
            P.CHAIN_EXPORT,
            P.TOOL_EXECUTE,
            P.FILE_READ,
            P.FILE_WRITE,
            P.SCHEDULE_READ,
            P.SCHEDULE_MANAGE,
        }
    ),
    # Reads tasks, chains and files, filtered; changes nothing.
    Role.VIEWER: frozenset({P.TASK_READ, P.CHAIN_READ, P.FILE_READ, P.SCHEDULE_READ}),
    # Reads everything as it happened, the audit log and costs included; changes nothing.
    Role.AUDITOR: frozenset(
        {
            P.TASK_READ,
            P.CHAIN_READ,
            P.CHAIN_READ_FULL,
            P.CHAIN_EXPORT,
            P.COST_VIEW,
            P.AUDIT_READ,
            P.FILE_READ,
            P.SCHEDULE_READ,
        }
    ),
}

_KNOWN_ROLES = frozenset(role.value for role in Role)


def permissions_of(roles: Iterable[str]) -> frozenset[Permission]:
    granted: set[Permission] = set()
    for role in roles:
        if role in _KNOWN_ROLES:
            granted |= ROLE_PERMISSIONS[Role(role)]
    return frozenset(granted)


def crosses_tenants(roles: Iterable[str]) -> bool:
    """Whether these roles act on every tenant, not only the token's own."""
    return Role.PLATFORM_ADMIN.value in roles


def cancels_any_task(roles: Iterable[str]) -> bool:
    """Members cancel their own tasks; tenant (and platform) admins any task of the tenant."""
    return bool({Role.TENANT_ADMIN.value, Role.PLATFORM_ADMIN.value} & set(roles))
