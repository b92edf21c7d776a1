"""Tenant administration: every change is stored with its audit event in one transaction,
and seen at once by this process's tenant directory."""

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.chain.models import utc_now
from app.errors import Forbidden, NotFound, OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.governance.retention import RetentionDefaults, periods
from app.governance.tenants import Tenant, TenantDirectory, quotas_columns
from app.resources.toolbox import Toolbox
from app.security.rbac import Permission
from app.security.visibility import VisibilityPolicy
from app.storage.database import Database
from app.storage.records import NetworkAllow, TenantRecord
from app.storage.tenants import TenantRepository
from app.tools.approvals import ApprovalRules
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.errors import FieldError
from app.tools.net.policy import parse_entry, tenant_refusal

# A tenant as its creation is audited: what its listing shows.
_LISTED = {"id", "name", "status", "enabled_tools", "created_at", "updated_at"}


class InvalidSettings(OmniForgeError):
    """Settings naming what the service does not have (tools, models); `problems` name each
    by its field."""

    def __init__(self, message: str, problems: list[FieldError]) -> None:
        super().__init__(message)
        self.problems = problems


@dataclass(frozen=True, slots=True)
class TenantService:
    """Tenants and their settings. Tool lists are checked against the `toolbox` (with each
    tenant's MCP servers' and remote agents' tools), model policies against the configured
    `models`; retention periods left unset are the platform's (`retention`)."""

    database: Database
    directory: TenantDirectory
    toolbox: Toolbox
    models: Sequence[str]
    retention: RetentionDefaults

    async def page(self, *, after: str | None, limit: int) -> list[TenantRecord]:
        """By id, after `after`: at most `limit + 1` (the extra one says there is more)."""
        async with self.database.read() as connection:
            return await TenantRepository(connection).page(after=after, limit=limit)

    async def create(
        self, caller: Caller, *, tenant_id: str, name: str, enabled_tools: list[str] | None
    ) -> TenantRecord:
        await self._check_tools(enabled_tools, None)
        async with self.database.transaction() as connection:
            record = await TenantRepository(connection).create(
                tenant_id, name, at=utc_now(), enabled_tools=enabled_tools
            )
            await record_change(
                connection,
                caller,
                record.id,
                action=AuditAction.TENANT_CREATE,
                before=None,
                after=record.model_dump(mode="json", include=_LISTED),
            )
        self.directory.put(record)
        return record

    async def update(
        self, caller: Caller, tenant: Tenant, *, name: str | None, status: str | None
    ) -> TenantRecord:
        """Renames, disables or enables the tenant (what is None stays)."""
        given = {"name": name, "status": status}
        changes = {field: value for field, value in given.items() if value is not None}
        return await self._change(caller, tenant, AuditAction.TENANT_UPDATE, changes)

    async def set_visibility(
        self, caller: Caller, tenant: Tenant, policy: VisibilityPolicy
    ) -> TenantRecord:
        changes = {"visibility": policy.model_dump(mode="json")}
        return await self._change(caller, tenant, AuditAction.VISIBILITY_UPDATE, changes)

    async def set_tools(
        self, caller: Caller, tenant: Tenant, tools: list[str] | None
    ) -> TenantRecord:
        """The tools its runs may use (None: every registered one)."""
        await self._check_tools(tools, tenant)
        changes = {"enabled_tools": tools}
        return await self._change(caller, tenant, AuditAction.TOOLS_UPDATE, changes)

    async def set_network(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        allow: Sequence[str] | None,
        platform_allow: Sequence[str] | None,
    ) -> TenantRecord:
        """Replaces the tenant's own list when `allow` is given; the platform allowance only
        when a platform admin gives one (a tenant admin may give it back as it is, nothing
        else: `Forbidden`). Its MCP servers are reached under the new lists at once."""
        async with self.database.transaction() as connection:
            tenants = TenantRepository(connection)
            current = await tenants.get(tenant.id, for_update=True)
            if current is None:
                raise NotFound("tenant", tenant.id)
            stored = NetworkAllow.of(current.network_allow)
            platform = stored.platform_allow
            if platform_allow is not None and tuple(platform_allow) != platform:
                if not caller.crosses_tenants:
                    raise Forbidden(
                        "`platform_allow` opens addresses beyond the public internet and is "
                        "set by platform admins only; a tenant admin may send it back unchanged",
                        permission=Permission.TENANT_MANAGE,
                    )
                platform = tuple(platform_allow)
            own = _checked_own(stored) if allow is None else tuple(allow)
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
        self.directory.put(record)
        if self.toolbox.mcp is not None:
            self.toolbox.mcp.changed(tenant.id)
        return record

    async def set_approvals(
        self, caller: Caller, tenant: Tenant, rules: ApprovalRules
    ) -> TenantRecord:
        document = rules.model_dump(mode="json", exclude_defaults=True)
        changes = {"approvals": document or None}
        return await self._change(caller, tenant, AuditAction.APPROVALS_UPDATE, changes)

    async def set_retention(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        retention_days: int | None,
        audit_retention_days: int | None,
    ) -> TenantRecord:
        """The tenant's own retention periods in days (None: the platform's)."""
        changes = {"retention_days": retention_days, "audit_retention_days": audit_retention_days}
        return await self._change(caller, tenant, AuditAction.RETENTION_UPDATE, changes)

    def retention_periods(self, record: TenantRecord) -> tuple[int, int]:
        """The days the tenant's data and its audit events are kept: its own, else the
        platform's."""
        return periods(record, self.retention)

    async def set_quotas(
        self, caller: Caller, tenant: Tenant, quotas: TenantQuotas
    ) -> TenantRecord:
        changes = quotas_columns(quotas)
        return await self._change(caller, tenant, AuditAction.QUOTAS_UPDATE, changes)

    async def set_models(self, caller: Caller, tenant: Tenant, policy: ModelPolicy) -> TenantRecord:
        self._check_models(policy)
        changes = {"models": policy.model_dump(mode="json", exclude_defaults=True)}
        return await self._change(caller, tenant, AuditAction.MODELS_UPDATE, changes)

    async def _check_tools(self, tools: list[str] | None, tenant: Tenant | None) -> None:
        """Refuses tool names the tenant's runs could not find (its MCP servers' tools
        count)."""
        registry = (
            self.toolbox.registry
            if tenant is None
            else (await self.toolbox.for_tenant(tenant)).registry
        )
        unknown = [
            FieldError(f"enabled_tools.{index}", f"unknown tool {name!r}")
            for index, name in enumerate(tools or [])
            if name == LLM_TOOL_NAME or name not in registry
        ]
        if unknown:
            raise InvalidSettings("the tool list names unknown tools", unknown)

    def _check_models(self, policy: ModelPolicy) -> None:
        """Refuses a policy naming what the model list does not have: a pattern or cap
        matching no configured model (a typo would otherwise approve nothing), or a default
        model that is unknown or not approved."""
        configured = list(self.models)
        problems: list[FieldError] = []
        for index, pattern in enumerate(policy.approved or []):
            if not fnmatch.filter(configured, pattern):
                problems.append(
                    FieldError(
                        f"approved.{index}",
                        f"{pattern!r} matches no configured model ({', '.join(configured)})",
                    )
                )
        for pattern in policy.max_output_tokens:
            if not fnmatch.filter(configured, pattern):
                problems.append(
                    FieldError(
                        f"max_output_tokens.{pattern}", f"{pattern!r} matches no configured model"
                    )
                )
        default = policy.default_model
        if default is not None:
            if default not in configured:
                problems.append(FieldError("default_model", f"unknown model {default!r}"))
            elif not policy.approves(default):
                problems.append(
                    FieldError("default_model", f"{default!r} is not an approved model")
                )
        if problems:
            raise InvalidSettings("the model policy names models it cannot", problems)

    async def _change(
        self, caller: Caller, tenant: Tenant, action: AuditAction, changes: dict[str, Any]
    ) -> TenantRecord:
        async with self.database.transaction() as connection:
            tenants = TenantRepository(connection)
            current = await tenants.get(tenant.id, for_update=True)
            if current is None:
                raise NotFound("tenant", tenant.id)
            before = {name: getattr(current, name) for name in changes}
            record = await tenants.update(tenant.id, at=utc_now(), **changes)
            await record_change(
                connection, caller, tenant.id, action=action, before=before, after=changes
            )
        self.directory.put(record)
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
