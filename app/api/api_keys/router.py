"""/api/v1/api-keys: the caller's tenant's API keys (tenant admins)."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response, status

from app.api.access import RequireApiKeyConfigure
from app.api.api_keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyOut, ApiKeyPage
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.services import TenantApiKeys
from app.storage.pagination import MAX_PAGE_SIZE, Cursor

router = APIRouter(prefix="/api/v1/api-keys", tags=["api-keys"], route_class=CheckedRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key",
    responses=problems(401, 403, 422),
)
async def create_api_key(
    body: ApiKeyCreate, caller: RequireApiKeyConfigure, api_keys: TenantApiKeys
) -> ApiKeyCreated:
    """A key of the caller's tenant with the roles given (together at most the permissions
    of the caller's own roles: 403 otherwise). The answer holds the secret (`omf_…`), shown
    this once. Use it as `Authorization: Bearer omf_…` wherever a token works; the audit log
    names it `api-key:<prefix>`. Audited (`api_key.create`)."""
    record, secret = await api_keys.create(
        caller,
        caller.tenant,
        name=body.name,
        roles=[role.value for role in body.roles],
        expires_at=body.expires_at,
        quotas=body.quotas,
    )
    return ApiKeyCreated(**ApiKeyOut.of(record).model_dump(), secret=secret)


@router.get("", summary="List API keys", responses=problems(401, 403, 422))
async def list_api_keys(
    caller: RequireApiKeyConfigure,
    api_keys: TenantApiKeys,
    include_revoked: bool = False,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> ApiKeyPage:
    """The tenant's keys, newest first: prefix, roles, creator, last use; never secrets."""
    page = await api_keys.page(
        caller.tenant,
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
        include_revoked=include_revoked,
    )
    return ApiKeyPage(
        items=[ApiKeyOut.of(item) for item in page.items], next_cursor=page.next_cursor
    )


@router.get("/{key_id}", summary="Read an API key", responses=problems(401, 403, 404, 422))
async def get_api_key(
    key_id: UUID, caller: RequireApiKeyConfigure, api_keys: TenantApiKeys
) -> ApiKeyOut:
    return ApiKeyOut.of(await api_keys.get(caller.tenant, key_id))


@router.delete(
    "/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Revoke an API key",
    responses=problems(401, 403, 404, 422),
)
async def revoke_api_key(
    key_id: UUID, caller: RequireApiKeyConfigure, api_keys: TenantApiKeys
) -> Response:
    """Refused from now on by this instance, by the others within `OMNIFORGE_API_KEY_CACHE_S`
    (5 s by default). The key stays listed (`include_revoked=true`) as revoked. Audited
    (`api_key.revoke`); revoking a revoked key changes nothing."""
    await api_keys.revoke(caller, caller.tenant, key_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
