"""/api/v1/tenants/{tenant_id}/secrets: a tenant's secrets, by name; values are write-only."""

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.access import RequireSecretConfigure, TenantForSecretConfigure
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.query import decode_key_cursor
from app.api.secrets.schemas import SecretName, SecretOut, SecretPage, SecretScope, SecretValue
from app.api.services import Secrets
from app.storage.pagination import MAX_PAGE_SIZE

router = APIRouter(prefix="/api/v1/tenants", tags=["secrets"], route_class=CheckedRoute)


@router.put(
    "/{tenant_id}/secrets/{name}",
    summary="Set a secret",
    status_code=status.HTTP_200_OK,
    responses={
        status.HTTP_201_CREATED: {"model": SecretOut, "description": "The secret is new."},
        **problems(401, 403, 404, 422),
    },
)
async def put_secret(
    name: SecretName,
    body: SecretValue,
    caller: RequireSecretConfigure,
    tenant: TenantForSecretConfigure,
    secrets: Secrets,
    response: Response,
) -> SecretOut:
    """Creates the secret (201) or replaces its value (200). The value is sealed with
    AES-256-GCM under the service's key, bound to the tenant and name, and no route ever
    answers it; tools and MCP servers use it as `{"secret": "NAME"}`, and it is masked (in any
    case, escaped or encoded) in every step, stream, export, status, audit row and log line.
    `usable_by` says who may use it (absent: kept when a value is replaced, anyone for a new
    secret). A value that a header of the tenant's MCP servers or remote agents sends must be
    one a header can carry (visible ASCII), else 422. Runs starting from now use the new
    value (on other instances within `OMNIFORGE_TENANT_CACHE_S`). Audited (`secret.put`, with
    its scope, without the value)."""
    record, created = await secrets.put(caller, tenant, name, body.value, body.scope())
    if created:
        response.status_code = status.HTTP_201_CREATED
    return SecretOut.of(record)


@router.patch(
    "/{tenant_id}/secrets/{name}",
    summary="Change who may use a secret",
    responses=problems(401, 403, 404, 422),
)
async def scope_secret(
    name: SecretName,
    body: SecretScope,
    caller: RequireSecretConfigure,
    tenant: TenantForSecretConfigure,
    secrets: Secrets,
) -> SecretOut:
    """Sets the secret's `usable_by` (null: anyone of the tenant); its value stays. Runs and
    MCP sessions starting from now are held to it. Audited (`secret.scope`)."""
    return SecretOut.of(await secrets.set_scope(caller, tenant, name, body.usable_by))


@router.get(
    "/{tenant_id}/secrets",
    summary="A tenant's secrets (names only)",
    responses=problems(401, 403, 404, 422),
)
async def list_secrets(
    tenant: TenantForSecretConfigure,
    secrets: Secrets,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> SecretPage:
    """By name: who set each when, and who may use it; never a value."""
    after = decode_key_cursor(cursor) if cursor else None
    return SecretPage.of(await secrets.page(tenant, after=after, limit=limit), limit)


@router.delete(
    "/{tenant_id}/secrets/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a secret",
    responses=problems(401, 403, 404, 422),
)
async def delete_secret(
    name: SecretName,
    caller: RequireSecretConfigure,
    tenant: TenantForSecretConfigure,
    secrets: Secrets,
) -> Response:
    """Runs starting from now no longer find it (a reference to it fails the call with
    `secret_not_found`). Audited (`secret.delete`)."""
    await secrets.delete(caller, tenant, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
