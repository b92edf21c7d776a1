"""A tenant's jobs beyond its slots wait for one of its own to finish; another tenant's job
starts at once, and a tenant nobody is waiting for leaves nothing behind."""

import asyncio
import threading

from app.bulkheads import TenantSlots, TenantThreads


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


async def test_a_tenants_thread_work_past_its_slots_waits_while_anothers_runs() -> None:
    """Tenant A's first job blocks its worker thread: A's second never reaches a thread until
    it ends, while B's runs at once; the service's own work (no tenant) takes no slot."""
    threads = TenantThreads(per_tenant=1)
    release = threading.Event()
    ran: list[str] = []

    def work(name: str) -> str:
        ran.append(name)
        if name == "a1":
            release.wait(timeout=30)
        return name

    first = asyncio.ensure_future(threads.run("a", work, "a1"))
    second = asyncio.ensure_future(threads.run("a", work, "a2"))
    assert await threads.run("b", work, "b1") == "b1"
    assert await threads.run(None, work, "service") == "service"
    assert threads.busy("a") == 2
    assert "a2" not in ran
    assert not second.done()

    release.set()
    assert list(await asyncio.gather(first, second)) == ["a1", "a2"]
    assert ran.index("a2") > ran.index("b1")
    assert threads.busy("a") == 0
