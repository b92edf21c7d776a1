"""Per-tenant bulkheads: at most so many of one tenant's jobs of a kind at once; its others
wait their turn, other tenants' do not wait for them."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class TenantSlots:
    """`per_tenant` slots for each tenant, within one event loop."""

    def __init__(self, per_tenant: int) -> None:
        if per_tenant < 1:
            raise ValueError("a tenant needs at least one slot")
        self.per_tenant = per_tenant
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._holders: dict[str, int] = {}

    @asynccontextmanager
    async def slot(self, tenant_id: str) -> AsyncIterator[None]:
        """Holds one of the tenant's slots (waiting for one) for the block."""
        semaphore = self._slots.setdefault(tenant_id, asyncio.Semaphore(self.per_tenant))
        self._holders[tenant_id] = self._holders.get(tenant_id, 0) + 1
        try:
            async with semaphore:
                yield
        finally:
            # Waiting or holding, counted: the tenant's semaphore goes once nobody needs it.
            self._holders[tenant_id] -= 1
            if not self._holders[tenant_id]:
                del self._holders[tenant_id]
                del self._slots[tenant_id]

    def busy(self, tenant_id: str) -> int:
        """How many of the tenant's jobs hold or wait for a slot."""
        return self._holders.get(tenant_id, 0)
