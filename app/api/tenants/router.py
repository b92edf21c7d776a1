"""/api/v1/tenants: tenants; their visibility settings, tools, quotas and model policy; their
audit log."""

from typing import Annotated

from fastapi import APIRouter, Query, status

from app.api.access import (
    RequireCostConfigure,
    RequirePlatformAdmin,
    RequireRateLimitConfigure,
    RequireTenantManage,
    RequireToolConfigure,
    TenantForAuditRead,
    TenantForCostConfigure,
    TenantForPlatformAdmin,
    TenantForRateLimitConfigure,
    TenantForTenantManage,
    TenantForToolConfigure,
)
from app.api.deps import State
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.query import Moment, aware, decode_int_cursor, decode_key_cursor, encode_key_cursor
from app.api.services import Tenants
from app.api.tenants.schemas import (
    AuditEventOut,
    AuditPage,
    NetworkOut,
    NetworkSettings,
    RetentionOut,
    RetentionSettings,
    TenantCreate,
    TenantOut,
    TenantPage,
    TenantUpdate,
    ToolSettings,
)
from app.governance.audit_log import AuditFilter, audit_page
from app.governance.models import ModelPolicy
from app.governance.quotas import TenantQuotas
from app.governance.tenants import quotas_of
from app.security.visibility import VisibilityPolicy
from app.storage.pagination import MAX_PAGE_SIZE
from app.tools.approvals import ApprovalRules

router = APIRouter(prefix="/api/v1/tenants", tags=["tenants"], route_class=CheckedRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a tenant",
    responses=problems(401, 403, 409, 422),
)
async def post_tenant(
    body: TenantCreate, caller: RequirePlatformAdmin, tenants: Tenants
) -> TenantOut:
    """Platform admins only. Tokens naming the new id are accepted at once."""
    record = await tenants.create(
        caller, tenant_id=body.id, name=body.name, enabled_tools=body.enabled_tools
    )
    return TenantOut.of(record)


@router.get("", summary="List tenants", responses=problems(401, 403, 422))
async def list_tenants(
    caller: RequirePlatformAdmin,
    tenants: Tenants,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> TenantPage:
    """Platform admins only; by id."""
    after = decode_key_cursor(cursor) if cursor else None
    records = await tenants.page(after=after, limit=limit)
    items = [TenantOut.of(record) for record in records[:limit]]
    more = len(records) > limit
    return TenantPage(items=items, next_cursor=encode_key_cursor(items[-1].id) if more else None)


@router.get("/{tenant_id}", summary="Read a tenant", responses=problems(401, 403, 404, 422))
async def get_tenant(tenant: TenantForTenantManage) -> TenantOut:
    """A tenant admin reads its own tenant; a platform admin any."""
    return TenantOut.of(tenant.record)


@router.patch(
    "/{tenant_id}",
    summary="Rename, disable or enable a tenant",
    responses=problems(401, 403, 404, 422),
)
async def patch_tenant(
    body: TenantUpdate,
    caller: RequirePlatformAdmin,
    tenant: TenantForPlatformAdmin,
    tenants: Tenants,
) -> TenantOut:
    """Platform admins only. A disabled tenant's tokens are refused with 403 (on this
    instance at once, on others within `OMNIFORGE_TENANT_CACHE_S`)."""
    record = await tenants.update(caller, tenant, name=body.name, status=body.status)
    return TenantOut.of(record)


@router.get(
    "/{tenant_id}/visibility",
    summary="A tenant's visibility settings",
    responses=problems(401, 403, 404, 422),
)
async def get_visibility(tenant: TenantForToolConfigure) -> VisibilityPolicy:
    """A thinking step (the model's reasoning) is shown at the level these rules give the LLM
    tool (tool type `llm`, tool name `llm`), else at its stored level; a synthesis step (the
    answer, which the task's `result` shows anyway) always at its stored level."""
    return tenant.visibility


@router.put(
    "/{tenant_id}/visibility",
    summary="Set a tenant's visibility settings",
    responses=problems(401, 403, 404, 422),
)
async def put_visibility(
    policy: VisibilityPolicy,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    tenants: Tenants,
) -> VisibilityPolicy:
    """Levels (`full`, `summary`, `hidden`) per tool type and per tool name, per-role
    overrides, and extra sensitive field names. Applies to every read from now on, of past
    chains too: steps are stored whole and filtered as they are served. Audited with the
    settings before and after. A thinking step (the model's reasoning) is shown at the level
    these rules give the LLM tool (tool type `llm`, tool name `llm`), else at its stored level;
    a synthesis step (the answer, which the task's `result` shows anyway) always at its stored
    level."""
    record = await tenants.set_visibility(caller, tenant, policy)
    return VisibilityPolicy.model_validate(record.visibility)


@router.get(
    "/{tenant_id}/tools",
    summary="The tools a tenant's runs may use",
    responses=problems(401, 403, 404, 422),
)
async def get_tools(tenant: TenantForToolConfigure) -> ToolSettings:
    return ToolSettings(enabled_tools=tenant.record.enabled_tools)


@router.put(
    "/{tenant_id}/tools",
    summary="Set the tools a tenant's runs may use",
    responses=problems(401, 403, 404, 422),
)
async def put_tools(
    body: ToolSettings,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    tenants: Tenants,
) -> ToolSettings:
    """`null` enables every registered tool. Audited with the list before and after."""
    record = await tenants.set_tools(caller, tenant, body.enabled_tools)
    return ToolSettings(enabled_tools=record.enabled_tools)


@router.get(
    "/{tenant_id}/network",
    summary="Where a tenant's HTTP tools and MCP servers may go past the SSRF guard",
    responses=problems(401, 403, 404, 422),
)
async def get_network(tenant: TenantForToolConfigure) -> NetworkOut:
    """The tenant's own list and the platform's allowance for it."""
    return NetworkOut.of(tenant.record.network_allow)


@router.put(
    "/{tenant_id}/network",
    summary="Set where a tenant's HTTP tools and MCP servers may go past the SSRF guard",
    responses=problems(401, 403, 404, 422),
)
async def put_network(
    body: NetworkSettings,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    tenants: Tenants,
) -> NetworkOut:
    """`allow`, the tenant's own list: host names its `http_request` may call and public
    networks; an entry that reaches beyond the public internet (loopback, private, link-local,
    shared, reserved, NAT64…, `0.0.0.0/0`, `::/0`) or carries a port is refused with 422
    naming it. `platform_allow`, set by platform admins only (403 for anyone else who changes
    it): addresses, networks and single ports (`127.0.0.1:8000`) of any range its web tools,
    MCP servers, remote agents and webhooks may reach. Cloud metadata endpoints stay refused
    whatever either says, and so does the service's own port unless an entry names it with
    its address. Audited with the lists before and after."""
    record = await tenants.set_network(
        caller, tenant, allow=body.allow, platform_allow=body.platform_allow
    )
    return NetworkOut.of(record.network_allow)


@router.get(
    "/{tenant_id}/approvals",
    summary="Which tool calls of a tenant's runs wait for a human",
    responses=problems(401, 403, 404, 422),
)
async def get_approvals(tenant: TenantForToolConfigure) -> ApprovalRules:
    return ApprovalRules.model_validate(tenant.record.approvals or {})


@router.put(
    "/{tenant_id}/approvals",
    summary="Set which tool calls of a tenant's runs wait for a human",
    responses=problems(401, 403, 404, 422),
)
async def put_approvals(
    body: ApprovalRules,
    caller: RequireToolConfigure,
    tenant: TenantForToolConfigure,
    tenants: Tenants,
) -> ApprovalRules:
    """Rules by tool name and by tool type (`always` or `never`), and how long a call waits
    (`timeout_s`) before it is denied on its own. With a tool's own `approval` and its
    agent's rules, any `always` wins. Applies to calls made from now on. Audited with the
    rules before and after."""
    record = await tenants.set_approvals(caller, tenant, body)
    return ApprovalRules.model_validate(record.approvals or {})


@router.get(
    "/{tenant_id}/quotas",
    summary="A tenant's rate limits and default budget",
    responses=problems(401, 403, 404, 422),
)
async def get_quotas(tenant: TenantForRateLimitConfigure) -> TenantQuotas:
    return tenant.quotas


@router.put(
    "/{tenant_id}/quotas",
    summary="Set a tenant's rate limits and default budget",
    responses=problems(401, 403, 404, 422),
)
async def put_quotas(
    quotas: TenantQuotas,
    caller: RequireRateLimitConfigure,
    tenant: TenantForRateLimitConfigure,
    tenants: Tenants,
) -> TenantQuotas:
    """Replaces every limit (unset ones no longer limit). Submissions over
    `submissions_per_minute` or `concurrent_runs` are refused with 429 and `Retry-After`;
    inside a run, a call over a limit waits up to `max_wait_s`, then the run ends
    `rate_limited`. `default_budget` fills the budget limits a task leaves unset. Audited with
    the settings before and after."""
    return quotas_of(await tenants.set_quotas(caller, tenant, quotas))


@router.get(
    "/{tenant_id}/models",
    summary="A tenant's model policy",
    responses=problems(401, 403, 404, 422),
)
async def get_models(tenant: TenantForCostConfigure) -> ModelPolicy:
    return tenant.models


@router.put(
    "/{tenant_id}/models",
    summary="Set a tenant's model policy",
    responses=problems(401, 403, 404, 422),
)
async def put_models(
    policy: ModelPolicy,
    caller: RequireCostConfigure,
    tenant: TenantForCostConfigure,
    tenants: Tenants,
) -> ModelPolicy:
    """Approved models (with `*`/`?` wildcards; `null` approves every configured one), the
    default model of tasks naming none, output-token caps, and how `auto` agents assess a
    task's complexity (`heuristic`: never with a model call). A task naming an unapproved
    model is refused with 422 `model-not-approved`; runs never reach one, fallbacks included.
    Audited with the policy before and after."""
    record = await tenants.set_models(caller, tenant, policy)
    return ModelPolicy.model_validate(record.models)


@router.get(
    "/{tenant_id}/retention",
    summary="How long a tenant's data is kept",
    responses=problems(401, 403, 404, 422),
)
async def get_retention(tenant: TenantForTenantManage, tenants: Tenants) -> RetentionOut:
    return RetentionOut.of(tenant.record, tenants.retention_periods(tenant.record))


@router.put(
    "/{tenant_id}/retention",
    summary="Set how long a tenant's data is kept",
    responses=problems(401, 403, 404, 422),
)
async def put_retention(
    body: RetentionSettings,
    caller: RequireTenantManage,
    tenant: TenantForTenantManage,
    tenants: Tenants,
) -> RetentionOut:
    """Days from 1 to 3650; `null` (or left out) follows the platform's default
    (`OMNIFORGE_RETENTION_DAYS`, `OMNIFORGE_AUDIT_RETENTION_DAYS`). The daily purge deletes
    finished tasks, idle conversations and files past `retention_days`, and audit events past
    `audit_retention_days`; running, queued and waiting tasks are never purged. Audited with
    the settings before and after."""
    record = await tenants.set_retention(
        caller,
        tenant,
        retention_days=body.retention_days,
        audit_retention_days=body.audit_retention_days,
    )
    return RetentionOut.of(record, tenants.retention_periods(record))


@router.get(
    "/{tenant_id}/audit",
    summary="A tenant's audit log",
    responses=problems(401, 403, 404, 422),
)
async def get_audit(
    tenant: TenantForAuditRead,
    state: State,
    action: Annotated[
        str | None, Query(max_length=64, description="An action, or a prefix: `tenant.*`.")
    ] = None,
    actor: Annotated[str | None, Query(max_length=255)] = None,
    resource_type: Annotated[str | None, Query(max_length=32)] = None,
    resource_id: Annotated[str | None, Query(max_length=255)] = None,
    since: Annotated[Moment | None, Query(alias="from")] = None,
    until: Annotated[Moment | None, Query(alias="to")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> AuditPage:
    """Newest first. Append-only: no route changes or deletes an event."""
    wanted = AuditFilter(action, actor, resource_type, resource_id, aware(since), aware(until))
    records = await audit_page(
        state.database,
        tenant,
        wanted,
        before_id=decode_int_cursor(cursor) if cursor else None,
        limit=limit,
    )
    items = [AuditEventOut.of(record) for record in records[:limit]]
    more = len(records) > limit
    return AuditPage(items=items, next_cursor=encode_key_cursor(items[-1].id) if more else None)
