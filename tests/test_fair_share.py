"""The CPU work done in worker threads for a tenant (checking a call's arguments against a
schema with patterns, counting a large prompt's tokens) takes one of that tenant's thread
slots: with its slots held, the tenant's own work waits while another tenant's goes on."""

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

from app.bulkheads import TenantThreads
from app.chain import ToolType
from app.llm import LLMGateway, LLMRequest
from app.llm.config import load_model_list
from app.tools.base import BaseTool
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from tests.factories import context_for, new_chain

_PATTERNED = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^([A-Z]{3}-)+[0-9]+$"}},
    "required": ["code"],
}


class CodeTool(BaseTool):
    """Takes a `code` whose schema has a pattern: its arguments are checked off the loop."""

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name="lookup", type=ToolType.SKILL, description="looks a code up", parameters=_PATTERNED
        )

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        return ToolOutput(f"found {arguments['code']}")


@asynccontextmanager
async def held(threads: TenantThreads, tenant_id: str) -> AsyncIterator[None]:
    """Holds the tenant's only slot with a job blocked in its worker thread for the block."""
    release = threading.Event()
    blocker = asyncio.ensure_future(threads.run(tenant_id, release.wait, 30))
    try:
        yield
    finally:
        release.set()
        released = await blocker
    assert released, "the slot was let go by the blocker's own bound, not by the test"


async def waits_for_its_slot(
    threads: TenantThreads, tenant_id: str, work: Awaitable[Any], other: Awaitable[Any]
) -> tuple[Any, Any]:
    """Starts `work` (the tenant's, its slot held) and then runs `other` (another tenant's)
    to its end: `work` is then still waiting for the slot. Returns both results, `work`'s
    once the slot is let go."""
    async with held(threads, tenant_id):
        waiting = asyncio.ensure_future(work)
        other_result = await other
        assert threads.busy(tenant_id) == 2  # the blocker, and `work` waiting for its slot
        assert not waiting.done()
    return await waiting, other_result


async def test_a_tenants_patterned_arguments_wait_for_its_slot_while_anothers_are_checked() -> None:
    threads = TenantThreads(per_tenant=1)
    executor = ToolExecutor(ToolRegistry([CodeTool()]), threads=threads)
    chain_a, chain_b = new_chain(), new_chain()

    mine, theirs = await waits_for_its_slot(
        threads,
        "acme",
        executor.execute(chain_a, context_for(chain_a, tenant_id="acme"), "lookup", {"code": "X"}),
        executor.execute(
            chain_b, context_for(chain_b, tenant_id="globex"), "lookup", {"code": "ABC-7"}
        ),
    )

    assert theirs.success
    assert theirs.value == "found ABC-7"
    assert not mine.success  # checked once its slot was free: the code misses the pattern
    assert "does not match" in (mine.error or "")


async def test_a_tenants_large_prompt_is_counted_in_its_slot_while_anothers_is_counted() -> None:
    threads = TenantThreads(per_tenant=1)
    gateway = LLMGateway(load_model_list(None), threads=threads)

    def request(words: str) -> LLMRequest:
        # Large enough to be counted in a worker thread, and different: no cached count.
        return LLMRequest(model="demo", messages=[{"role": "user", "content": words * 5_000}])

    # Loaded before the slot is held: only the count is to wait for it, not LiteLLM's load
    # (which on a loaded machine may outlast the blocker's own bound).
    await gateway.loaded()
    mine, theirs = await waits_for_its_slot(
        threads,
        "acme",
        gateway.estimate(request("alpha beta "), tenant_id="acme"),
        gateway.estimate(request("gamma delta "), tenant_id="globex"),
    )

    assert mine.input_tokens > 10_000
    assert theirs.input_tokens > 10_000
