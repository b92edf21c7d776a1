"""Tenant administration: every change is stored with its audit event in one transaction,
and seen at once by this process's tenant directory."""

import fnmatch
from typing import Any

from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.api.tenants.schemas import (
    NetworkSettings,
    RetentionOut,
    RetentionSettings,
    TenantCreate,
    TenantOut,
    TenantUpdate,
)
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.governance.retention import RetentionDefaults, periods
from app.governance.tenants import Tenant, quotas_columns
from app.runs.errors import Forbidden, NotFound
from app.security.rbac import Permission
from app.security.visibility import VisibilityPolicy
from app.storage.records import TenantRecord
from app.storage.tenants import NetworkAllow, TenantRepository
from app.tools.approvals import ApprovalRules
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.net.policy import parse_entry, tenant_refusal


async def check_tools(state: AppState, tools: list[str] | None, tenant: Tenant | None) -> None:
    """Refuses tool names the tenant's runs could not find (its MCP servers' tools count)."""
    registry = (
        state.runtime.registry
        if tenant is None
        else (await state.toolbox.for_tenant(tenant)).registry
    )
    unknown = [
        FieldProblem(field=f"body.enabled_tools.{index}", message=f"unknown tool {name!r}")
        for index, name in enumerate(tools or [])
        if name == LLM_TOOL_NAME or name not in registry
    ]
    if unknown:
        raise ApiError(VALIDATION, "the tool list names unknown tools", errors=unknown)


async def create_tenant(state: AppState, caller: Caller, body: TenantCreate) -> TenantRecord:
    await check_tools(state, body.enabled_tools, None)
    async with state.database.transaction() as connection:
        record = await TenantRepository(connection).create(
            body.id, body.name, at=utc_now(), enabled_tools=body.enabled_tools
        )
        await record_change(
            connection,
            caller,
            record.id,
            action=AuditAction.TENANT_CREATE,
            before=None,
            after=TenantOut.of(record).model_dump(mode="json"),
        )
    state.tenants.put(record)
    return record


async def update_tenant(
    state: AppState, caller: Caller, tenant: Tenant, body: TenantUpdate
) -> TenantRecord:
    changes = body.model_dump(exclude_none=True)
    return await _change(state, caller, tenant, AuditAction.TENANT_UPDATE, changes)


async def set_visibility(
    state: AppState, caller: Caller, tenant: Tenant, policy: VisibilityPolicy
) -> TenantRecord:
    changes = {"visibility": policy.model_dump(mode="json")}
    return await _change(state, caller, tenant, AuditAction.VISIBILITY_UPDATE, changes)


async def set_tools(
    state: AppState, caller: Caller, tenant: Tenant, tools: list[str] | None
) -> TenantRecord:
    await check_tools(state, tools, tenant)
    changes = {"enabled_tools": tools}
    return await _change(state, caller, tenant, AuditAction.TOOLS_UPDATE, changes)


async def set_network(
    state: AppState, caller: Caller, tenant: Tenant, body: NetworkSettings
) -> TenantRecord:
    """Replaces the tenant's own list when the body has one; the platform allowance only
    when a platform admin sends one (a tenant admin may send it back as it is, nothing else:
    403)."""
    async with state.database.transaction() as connection:
        tenants = TenantRepository(connection)
        current = await tenants.get(tenant.id, for_update=True)
        if current is None:
            raise NotFound("tenant", tenant.id)
        stored = NetworkAllow.of(current.network_allow)
        platform = stored.platform_allow
        if body.platform_allow is not None and tuple(body.platform_allow) != platform:
            if not caller.crosses_tenants:
                raise Forbidden(
                    "`platform_allow` opens addresses beyond the public internet and is set "
                    "by platform admins only; a tenant admin may send it back unchanged",
                    permission=Permission.TENANT_MANAGE,
                )
            platform = tuple(body.platform_allow)
        own = _checked_own(stored) if body.allow is None else tuple(body.allow)
        document = NetworkAllow(own, platform).document()
        record = await tenants.update(tenant.id, at=utc_now(), network_allow=document)
        await record_change(
            connection,
            caller,
            tenant.id,
            action=AuditAction.NETWORK_UPDATE,
            before={"network_allow": current.network_allow},
            after={"network_allow": document},
        )
    state.tenants.put(record)
    if state.toolbox.mcp is not None:  # its servers are reached under the new list at once
        state.toolbox.mcp.changed(tenant.id)
    return record


def _checked_own(stored: NetworkAllow) -> tuple[str, ...]:
    """The tenant's own list as it stays: of a list stored before entries were checked, the
    entries a tenant admin may set now (the rest never applied)."""
    if not stored.unchecked:
        return stored.allow
    kept: list[str] = []
    for text in stored.allow:
        try:
            entry = parse_entry(text)
        except ValueError:
            continue
        if tenant_refusal(entry) is None:
            kept.append(entry.text)
    return tuple(kept)


async def set_approvals(
    state: AppState, caller: Caller, tenant: Tenant, rules: ApprovalRules
) -> TenantRecord:
    document = rules.model_dump(mode="json", exclude_defaults=True)
    changes = {"approvals": document or None}
    return await _change(state, caller, tenant, AuditAction.APPROVALS_UPDATE, changes)


async def set_retention(
    state: AppState, caller: Caller, tenant: Tenant, settings: RetentionSettings
) -> TenantRecord:
    changes = settings.model_dump()
    return await _change(state, caller, tenant, AuditAction.RETENTION_UPDATE, changes)


def retention_of(state: AppState, record: TenantRecord) -> RetentionOut:
    """A tenant's retention settings, with the periods that apply to it."""
    defaults = RetentionDefaults(state.settings.retention_days, state.settings.audit_retention_days)
    days, audit_days = periods(record, defaults)
    return RetentionOut(
        retention_days=record.retention_days,
        audit_retention_days=record.audit_retention_days,
        effective_retention_days=days,
        effective_audit_retention_days=audit_days,
    )


async def set_quotas(
    state: AppState, caller: Caller, tenant: Tenant, quotas: TenantQuotas
) -> TenantRecord:
    return await _change(state, caller, tenant, AuditAction.QUOTAS_UPDATE, quotas_columns(quotas))


def check_models(state: AppState, policy: ModelPolicy) -> None:
    """Refuses a policy naming what the model list does not have: a pattern or cap matching
    no configured model (a typo would otherwise approve nothing), or a default model that is
    unknown or not approved."""
    configured = state.runtime.gateway.model_names()
    problems: list[FieldProblem] = []
    for index, pattern in enumerate(policy.approved or []):
        if not fnmatch.filter(configured, pattern):
            problems.append(
                FieldProblem(
                    field=f"body.approved.{index}",
                    message=f"{pattern!r} matches no configured model ({', '.join(configured)})",
                )
            )
    for pattern in policy.max_output_tokens:
        if not fnmatch.filter(configured, pattern):
            problems.append(
                FieldProblem(
                    field=f"body.max_output_tokens.{pattern}",
                    message=f"{pattern!r} matches no configured model",
                )
            )
    default = policy.default_model
    if default is not None:
        if default not in configured:
            problems.append(
                FieldProblem(field="body.default_model", message=f"unknown model {default!r}")
            )
        elif not policy.approves(default):
            problems.append(
                FieldProblem(
                    field="body.default_model", message=f"{default!r} is not an approved model"
                )
            )
    if problems:
        raise ApiError(VALIDATION, "the model policy names models it cannot", errors=problems)


async def set_models(
    state: AppState, caller: Caller, tenant: Tenant, policy: ModelPolicy
) -> TenantRecord:
    check_models(state, policy)
    changes = {"models": policy.model_dump(mode="json", exclude_defaults=True)}
    return await _change(state, caller, tenant, AuditAction.MODELS_UPDATE, changes)


async def _change(
    state: AppState, caller: Caller, tenant: Tenant, action: AuditAction, changes: dict[str, Any]
) -> TenantRecord:
    async with state.database.transaction() as connection:
        tenants = TenantRepository(connection)
        current = await tenants.get(tenant.id, for_update=True)
        if current is None:
            raise NotFound("tenant", tenant.id)
        before = {name: getattr(current, name) for name in changes}
        record = await tenants.update(tenant.id, at=utc_now(), **changes)
        await record_change(
            connection, caller, tenant.id, action=action, before=before, after=changes
        )
    state.tenants.put(record)
    return record
