"""/api/v1/me: who the caller is, in which tenant, with which roles and permissions — what a
client (the web console, a script checking its key) needs to know before anything else."""

from uuid import UUID

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.access import AnyCaller
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.security.rbac import Permission

router = APIRouter(tags=["identity"], route_class=CheckedRoute)


class TenantRef(BaseModel):
    id: str
    name: str


class ApiKeyRef(BaseModel):
    id: UUID
    name: str


class Me(BaseModel):
    subject: str = Field(description="The token's subject, or the creator of the API key used.")
    tenant: TenantRef
    roles: list[str]
    permissions: list[Permission] = Field(description="What the roles grant, sorted.")
    crosses_tenants: bool = Field(description="A platform admin: may act on every tenant.")
    api_key: ApiKeyRef | None = Field(description="The API key the caller used, if any.")


@router.get("/api/v1/me", summary="Who the caller is", responses=problems(401, 403, 422))
async def get_me(caller: AnyCaller) -> Me:
    grant = caller.api_key
    return Me(
        subject=caller.subject,
        tenant=TenantRef(id=caller.tenant.id, name=caller.tenant.record.name),
        roles=sorted(caller.roles),
        permissions=sorted(caller.permissions),
        crosses_tenants=caller.crosses_tenants,
        api_key=ApiKeyRef(id=grant.key_id, name=grant.name) if grant else None,
    )
