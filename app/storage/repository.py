"""The one place tenant scoping lives."""

from sqlalchemy.ext.asyncio import AsyncConnection


class TenantScoped:
    """The base of every repository over tenant data: each statement it builds is limited to
    `tenant_id`, so another tenant's ids simply are not found."""

    def __init__(self, connection: AsyncConnection, tenant_id: str) -> None:
        self.connection = connection
        self.tenant_id = tenant_id
