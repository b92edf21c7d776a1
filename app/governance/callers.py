"""Who is asking: an authenticated caller of an active tenant, with the permissions its roles
give. The API builds one per request; the services that change a tenant's resources record it
in their audit events."""

from dataclasses import dataclass

from app.errors import NotFound
from app.governance.api_keys import KeyGrant
from app.governance.tenants import Tenant, TenantDirectory
from app.security import Principal
from app.security.rbac import Permission, crosses_tenants
from app.security.visibility import ReaderView


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller of an active tenant, with its permissions; `api_key` when it
    called with one."""

    principal: Principal
    tenant: Tenant
    permissions: frozenset[Permission]
    api_key: KeyGrant | None = None

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    @property
    def subject(self) -> str:
        return self.principal.subject

    @property
    def roles(self) -> frozenset[str]:
        return self.principal.roles

    @property
    def crosses_tenants(self) -> bool:
        return crosses_tenants(self.principal.roles)

    async def scope(self, tenants: TenantDirectory, tenant_id: str) -> Tenant:
        """The tenant a route names, if this caller may act on it: its own, or any for a
        platform admin. Any other answers 404, as if it did not exist."""
        if tenant_id == self.tenant_id:
            return self.tenant
        tenant = await tenants.get(tenant_id) if self.crosses_tenants else None
        if tenant is None:
            raise NotFound("tenant", tenant_id)
        return tenant

    def view(self, sensitive_fields: frozenset[str], tenant: Tenant | None = None) -> ReaderView:
        """How this caller sees steps of `tenant` (its own by default), given the tools'
        sensitive argument fields."""
        return ReaderView(
            (tenant or self.tenant).visibility,
            roles=self.roles,
            full_access=Permission.CHAIN_READ_FULL in self.permissions,
            sensitive_fields=sensitive_fields,
        )
