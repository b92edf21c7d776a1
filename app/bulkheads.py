"""Per-tenant bulkheads: at most so many of one tenant's jobs of a kind at once; its others
wait their turn, other tenants' do not wait for them. Used by every layer, so it imports
nothing of ours."""

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")


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


class TenantThreads:
    """CPU work done in worker threads on a tenant's behalf (counting a prompt's tokens,
    checking arguments or an answer against a schema whose patterns may backtrack up to their
    budget): at most `per_tenant` of one tenant's jobs hold or wait for a worker thread at
    once. asyncio's worker threads are few (six on two CPUs) and shared by the whole process,
    file writes included; without this one tenant's flood of slow checks would queue every
    other tenant's work behind its own. By default a tenant may hold a third of them."""

    def __init__(self, per_tenant: int | None = None) -> None:
        if per_tenant is None:
            # asyncio's default executor has min(32, CPUs + 4) threads.
            per_tenant = max(1, min(32, (os.cpu_count() or 1) + 4) // 3)
        self._slots = TenantSlots(per_tenant)

    async def run(
        self, tenant_id: str | None, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """`work(*args, **kwargs)` in a worker thread, once one of the tenant's slots is free
        (work for no tenant, the service's own, takes no slot)."""
        if tenant_id is None:
            return await asyncio.to_thread(work, *args, **kwargs)
        async with self._slots.slot(tenant_id):
            return await asyncio.to_thread(work, *args, **kwargs)

    def busy(self, tenant_id: str) -> int:
        """How many of the tenant's jobs hold or wait for a worker thread."""
        return self._slots.busy(tenant_id)
