"""Who the caller is and what it may do: every route declares its permission through one of
the `Require…` aliases, and a route under `/tenants/{tenant_id}` takes the tenant it names
through a `TenantFor…` alias (checked with the same permission, then scoped: 404 for another
tenant's). Each of them also runs the input check (`app.api.inputs.check_inputs`) once the
caller is known to be permitted."""

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Annotated

from fastapi import Depends, Request

from app.api.auth import API_KEY_KEY, TENANT_KEY
from app.api.deps import CurrentPrincipal, State
from app.api.inputs import check_inputs
from app.api.state import AppState
from app.governance.api_keys import KeyGrant
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.runs.errors import Forbidden
from app.security import Principal
from app.security.rbac import Permission, Role, permissions_of


def _caller(request: Request, principal: Principal) -> Caller:
    tenant: Tenant = getattr(request.state, TENANT_KEY)
    grant: KeyGrant | None = getattr(request.state, API_KEY_KEY, None)
    return Caller(principal, tenant, permissions_of(principal.roles), grant)


def _permitted(request: Request, caller: Caller) -> Caller:
    """A caller whose permission is checked: now its input is (401, 403, then 422)."""
    check_inputs(request)
    return caller


@cache
def _requires(permission: Permission) -> Callable[[Request, Principal], Awaitable[Caller]]:
    """One dependency per permission: a route that takes the caller and the tenant it names
    (`TenantFor…`) checks the permission once."""

    async def dependency(request: Request, principal: CurrentPrincipal) -> Caller:
        caller = _caller(request, principal)
        if permission not in caller.permissions:
            roles = ", ".join(sorted(caller.roles)) or "none"
            raise Forbidden(
                f"this needs the `{permission}` permission, which the caller's roles "
                f"({roles}) do not grant",
                permission=permission,
            )
        return _permitted(request, caller)

    return dependency


async def _platform_admin(request: Request, principal: CurrentPrincipal) -> Caller:
    caller = _caller(request, principal)
    if not caller.crosses_tenants:
        raise Forbidden(
            f"this needs the `{Role.PLATFORM_ADMIN}` role", permission=Permission.TENANT_MANAGE
        )
    return _permitted(request, caller)


def _tenant_named(
    permitted: Callable[[Request, Principal], Awaitable[Caller]],
) -> Callable[[Caller, str, AppState], Awaitable[Tenant]]:
    """The tenant the route's path names (`/tenants/{tenant_id}/…`), once the caller is
    `permitted`: its own, or any for a platform admin; any other answers 404."""

    async def dependency(
        caller: Annotated[Caller, Depends(permitted)], tenant_id: str, state: State
    ) -> Tenant:
        return await caller.scope(state.tenants, tenant_id)

    return dependency


async def _any_caller(request: Request, principal: CurrentPrincipal) -> Caller:
    return _permitted(request, _caller(request, principal))


AnyCaller = Annotated[Caller, Depends(_any_caller)]
RequirePlatformAdmin = Annotated[Caller, Depends(_platform_admin)]
RequireTaskCreate = Annotated[Caller, Depends(_requires(Permission.TASK_CREATE))]
RequireTaskRead = Annotated[Caller, Depends(_requires(Permission.TASK_READ))]
RequireTaskCancel = Annotated[Caller, Depends(_requires(Permission.TASK_CANCEL))]
RequireTaskDelete = Annotated[Caller, Depends(_requires(Permission.TASK_DELETE))]
RequireChainRead = Annotated[Caller, Depends(_requires(Permission.CHAIN_READ))]
RequireChainExport = Annotated[Caller, Depends(_requires(Permission.CHAIN_EXPORT))]
RequireToolConfigure = Annotated[Caller, Depends(_requires(Permission.TOOL_CONFIGURE))]
RequireRateLimitConfigure = Annotated[Caller, Depends(_requires(Permission.RATE_LIMIT_CONFIGURE))]
RequireCostConfigure = Annotated[Caller, Depends(_requires(Permission.COST_CONFIGURE))]
RequireCostView = Annotated[Caller, Depends(_requires(Permission.COST_VIEW))]
RequireTenantManage = Annotated[Caller, Depends(_requires(Permission.TENANT_MANAGE))]
RequireAuditRead = Annotated[Caller, Depends(_requires(Permission.AUDIT_READ))]
RequireAgentConfigure = Annotated[Caller, Depends(_requires(Permission.AGENT_CONFIGURE))]
RequireSecretConfigure = Annotated[Caller, Depends(_requires(Permission.SECRET_CONFIGURE))]
RequireFileRead = Annotated[Caller, Depends(_requires(Permission.FILE_READ))]
RequireFileWrite = Annotated[Caller, Depends(_requires(Permission.FILE_WRITE))]
RequireApiKeyConfigure = Annotated[Caller, Depends(_requires(Permission.API_KEY_CONFIGURE))]
RequireWebhookConfigure = Annotated[Caller, Depends(_requires(Permission.WEBHOOK_CONFIGURE))]
RequireScheduleRead = Annotated[Caller, Depends(_requires(Permission.SCHEDULE_READ))]
RequireScheduleManage = Annotated[Caller, Depends(_requires(Permission.SCHEDULE_MANAGE))]

# The tenant a `/tenants/{tenant_id}/…` route names, for a caller with the permission.
TenantForPlatformAdmin = Annotated[Tenant, Depends(_tenant_named(_platform_admin))]
TenantForToolConfigure = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.TOOL_CONFIGURE)))
]
TenantForRateLimitConfigure = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.RATE_LIMIT_CONFIGURE)))
]
TenantForCostConfigure = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.COST_CONFIGURE)))
]
TenantForCostView = Annotated[Tenant, Depends(_tenant_named(_requires(Permission.COST_VIEW)))]
TenantForTenantManage = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.TENANT_MANAGE)))
]
TenantForSecretConfigure = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.SECRET_CONFIGURE)))
]
TenantForWebhookConfigure = Annotated[
    Tenant, Depends(_tenant_named(_requires(Permission.WEBHOOK_CONFIGURE)))
]
TenantForAuditRead = Annotated[Tenant, Depends(_tenant_named(_requires(Permission.AUDIT_READ)))]
TenantForChainRead = Annotated[Tenant, Depends(_tenant_named(_requires(Permission.CHAIN_READ)))]
