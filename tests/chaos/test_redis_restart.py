"""Redis, which holds the tenants' rate and cost windows for every instance, killed under load
and restarted empty. Redis is a cache of the windows, not their truth: while it is gone the
instances decide on windows read from the database (no request answered 500, no running task
failed), and once it is back every window is refilled from the database before it admits
anything, so a tenant's daily cost limit holds across the restart."""

import asyncio
from decimal import Decimal
from pathlib import Path

from sqlalchemy import func, select

from app.storage import Database
from app.storage.tables import cost_records, tasks
from tests.chaos.fleet import Fleet, fleet
from tests.chaos.followers import Followers, following
from tests.chaos.invariants import Allowances, assert_invariants
from tests.chaos.llm import price
from tests.chaos.submit import Submitted, submit_tasks
from tests.chaos.test_store_outages import server_errors

WAVE = 20
DOWN_S = 20
# Windows every call of the tenant goes through, none of which a wave comes near.
GENEROUS = {
    "submissions_per_minute": 10_000,
    "llm_calls_per_minute": 10_000,
    "tokens_per_hour": 100_000_000,
    "cost_per_day_usd": "1000",
}
# A model call's output cap: what an estimate reserves of it (with its prompt).
MAX_OUTPUT_TOKENS = "50"


async def set_quotas(group: Fleet, quotas: dict[str, object]) -> None:
    admin = group.token_for("admin", ("tenant_admin",))
    async with group.live()[0].client(admin) as client:
        response = await client.put(f"/api/v1/tenants/{group.tenant}/quotas", json=quotas)
        assert response.status_code == 200, response.text


async def spend(group: Fleet) -> Decimal:
    database = Database(group.database_url)
    try:
        async with database.read() as connection:
            total = await connection.scalar(
                select(func.coalesce(func.sum(cost_records.c.cost_usd), 0)).where(
                    cost_records.c.tenant_id == group.tenant
                )
            )
    finally:
        await database.dispose()
    assert total is not None
    return Decimal(total)


async def statuses(group: Fleet) -> dict[str, int]:
    database = Database(group.database_url)
    try:
        async with database.read() as connection:
            rows = await connection.execute(
                select(tasks.c.status, func.count())
                .where(tasks.c.tenant_id == group.tenant)
                .group_by(tasks.c.status)
            )
            return {row[0]: row[1] for row in rows}
    finally:
        await database.dispose()


async def run_to_done(group: Fleet, submitted: list[Submitted]) -> Followers:
    async with following(group, submitted, deadline_s=90) as followers:
        await followers.until_done()
    return followers


async def test_redis_killed_under_load_fails_nothing_and_answers_no_500(tmp_path: Path) -> None:
    async with fleet(tmp_path, llm_delay_s=1.0, redis=True) as group:
        assert group.redis is not None
        await group.start_all("a", "b")
        await set_quotas(group, GENEROUS)
        first = await submit_tasks(group, range(WAVE))
        async with following(group, first, deadline_s=90) as followers:
            await group.changes.wait_for(
                lambda: all(group.llm.calls_for(task.marker) for task in first),
                timeout_s=30,
                what="every task in its first model call",
            )
            await group.redis.kill()
            during = await submit_tasks(group, range(WAVE, 2 * WAVE))
            await asyncio.sleep(DOWN_S)  # Redis is down this long
            await followers.until_done()
            await group.redis.start()  # empty
        followed_during = await run_to_done(group, during)
        after = await submit_tasks(group, range(2 * WAVE, 3 * WAVE))
        followed_after = await run_to_done(group, after)
        every = [*first, *during, *after]
        streams = followers.by_marker | followed_during.by_marker | followed_after.by_marker
        await assert_invariants(group, every, Followers(streams), Allowances())
        assert group.llm.repeated() == {}
        assert server_errors(group) == []
        assert await statuses(group) == {"completed": 3 * WAVE}


async def test_a_daily_cost_limit_holds_across_a_redis_restart(tmp_path: Path) -> None:
    async with fleet(
        tmp_path, llm_delay_s=0.2, redis=True, OMNIFORGE_LLM_MAX_OUTPUT_TOKENS=MAX_OUTPUT_TOKENS
    ) as group:
        assert group.redis is not None
        await group.start_all("a", "b")
        # The tenant's runs offer the model one tool: a prompt of some 200 tokens, so that an
        # estimate of a call (its prompt and the output cap) is near what a call costs.
        admin = group.token_for("admin", ("tenant_admin",))
        async with group.live()[0].client(admin) as client:
            tools = {"enabled_tools": ["calculator"]}
            response = await client.put(f"/api/v1/tenants/{group.tenant}/tools", json=tools)
            assert response.status_code == 200, response.text
        # About a dozen tasks' worth: each task's two calls cost price(120, 18) + price(160, 12).
        limit = Decimal("0.004")
        await set_quotas(group, {"cost_per_day_usd": str(limit), "max_wait_s": 0})
        await run_to_done(group, await submit_tasks(group, range(30)))
        # One task at a time until one is refused: what is left is less than a call needs.
        for marker in range(30, 60):
            failed = (await statuses(group)).get("failed", 0)
            await run_to_done(group, await submit_tasks(group, [marker]))
            if (await statuses(group)).get("failed", 0) > failed:
                break
        else:
            raise AssertionError("the limit stopped no task")
        spent = await spend(group)
        calls = len(group.llm.calls)

        await group.redis.kill()
        await run_to_done(group, await submit_tasks(group, range(100, 105)))  # Redis down
        await group.redis.start()  # empty: the day's spend is in the database alone
        await run_to_done(group, await submit_tasks(group, range(105, 115)))

        # What an estimate of one call reserves at most: its prompt (well under 1,000 tokens
        # with one tool) and the output cap.
        one_call = price(1_000, int(MAX_OUTPUT_TOKENS))
        assert await spend(group) == spent, "calls were made past the limit after the restart"
        assert len(group.llm.calls) == calls, "the model was called past the limit"
        assert spent <= limit + one_call, f"spent {spent} against a limit of {limit}"
        assert server_errors(group) == []
