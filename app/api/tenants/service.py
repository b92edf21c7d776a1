"""Tenant administration: every change is stored with its audit event in one transaction,
and seen at once by this process's tenant directory."""

from typing import Any

from app.api.access import Caller
from app.api.auditing import record_change
from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.api.tenants.schemas import TenantCreate, TenantOut, TenantUpdate
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.tenants import Tenant
from app.runs.errors import NotFound
from app.security.visibility import VisibilityPolicy
from app.storage.records import TenantRecord
from app.storage.tenants import TenantRepository
from app.tools.builtin.llm import LLM_TOOL_NAME


def check_tools(state: AppState, tools: list[str] | None) -> None:
    registry = state.runtime.registry
    unknown = [
        FieldProblem(field=f"body.enabled_tools.{index}", message=f"unknown tool {name!r}")
        for index, name in enumerate(tools or [])
        if name == LLM_TOOL_NAME or name not in registry
    ]
    if unknown:
        raise ApiError(VALIDATION, "the tool list names unknown tools", errors=unknown)


async def create_tenant(state: AppState, caller: Caller, body: TenantCreate) -> TenantRecord:
    check_tools(state, body.enabled_tools)
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
    check_tools(state, tools)
    changes = {"enabled_tools": tools}
    return await _change(state, caller, tenant, AuditAction.TOOLS_UPDATE, changes)


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
