"""A tenant's jobs beyond its slots wait for one of its own to finish; another tenant's job
starts at once, and a tenant nobody is waiting for leaves nothing behind."""

import asyncio

from app.tools.bulkheads import TenantSlots


async def test_a_tenant_past_its_slots_waits_and_others_do_not() -> None:
    slots = TenantSlots(per_tenant=1)
    release = asyncio.Event()
    started: list[str] = []

    async def job(tenant: str, name: str) -> None:
        async with slots.slot(tenant):
            started.append(name)
            if name == "a1":
                await release.wait()

    first = asyncio.create_task(job("a", "a1"))
    second = asyncio.create_task(job("a", "a2"))
    other = asyncio.create_task(job("b", "b1"))
    await other  # B finishes while A's first job holds A's only slot
    assert started == ["a1", "b1"]
    assert slots.busy("a") == 2
    assert not second.done()

    release.set()
    await asyncio.gather(first, second)
    assert started == ["a1", "b1", "a2"]
    assert slots.busy("a") == 0
    assert slots._slots == {}
