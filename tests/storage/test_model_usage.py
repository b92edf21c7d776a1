"""The daily model-usage roll-up is upserted with the cost records it sums, atomically: writers
of several processes (separate engines here) racing on the same rows add up exactly."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import UUID, uuid4

import pytest
from sqlalchemy import select

from app.chain import ToolType
from app.storage import Database
from app.storage.runs import Fence, RunStores, RunWrite
from app.storage.runs.rows import CostRow
from app.storage.tables import cost_records, model_usage
from tests.factories import stored_task

TENANT = "usage-tenant"


@pytest.fixture
async def databases(own_database_url: str) -> AsyncIterator[list[Database]]:
    """Two engines on a database of this test's own: no running service claims its tasks."""
    # Small pools: the suite's workers share one Postgres; the writers queue for connections.
    engines = [Database(own_database_url, pool_size=5), Database(own_database_url, pool_size=5)]
    yield engines
    for engine in engines:
        await engine.dispose()


@pytest.fixture
def tenant() -> str:
    """A tenant id of this test's own database (no tenant row is needed here)."""
    return f"t-{uuid4().hex[:12]}"


def _cost(
    tenant: str,
    task_id: UUID,
    chain_id: UUID,
    model: str | None,
    tokens: tuple[int, int],
    cost: Decimal | None,
    at: datetime,
) -> CostRow:
    return {
        "tenant_id": tenant,
        "user_id": "u",
        "task_id": task_id,
        "chain_id": chain_id,
        "step_id": uuid4(),
        "correlation_id": uuid4(),
        "tool_name": "llm" if model else "search",
        "tool_type": ToolType.LLM if model else ToolType.EXTERNAL,
        "model": model,
        "deployment": None,
        "provider": None,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cost_usd": cost,
        "unpriced": cost is None,
        "recorded_at": at,
        "strategy": "react",
        "sandbox_s": None,
    }


async def test_concurrent_writers_add_up_exactly(databases: list[Database]) -> None:
    tenant = f"{TENANT}-{uuid4().hex[:8]}"
    stores = [RunStores.of(database) for database in databases]
    tasks = [await stored_task(stores[0].queue, tenant, runner_id="r") for _ in range(40)]
    today = datetime.now(UTC)
    yesterday = today - timedelta(days=1)
    price = Decimal("0.100000000001")  # 12 places: floats would not sum this exactly

    def group(index: int) -> list[RunWrite]:
        task_id, chain_id = tasks[index]
        write = RunWrite(task_id, chain_id, Fence("r", 1), 0, 0)
        write.costs = [
            _cost(tenant, task_id, chain_id, "alpha", (10, 3), price * (index + 1), today),
            _cost(tenant, task_id, chain_id, "beta", (7, 1), None, today),
            _cost(tenant, task_id, chain_id, "alpha", (5, 5), price, yesterday),
            _cost(tenant, task_id, chain_id, None, (0, 0), Decimal("0.5"), today),
        ]
        return [write]

    refused = await asyncio.gather(*[stores[i % 2].writes.append(group(i)) for i in range(40)])
    assert all(not lost for lost in refused)

    async with databases[0].read() as connection:
        rolled = {
            (row.day, row.model): row
            for row in await connection.execute(
                select(model_usage).where(model_usage.c.tenant_id == tenant)
            )
        }
        records = list(
            await connection.execute(
                select(cost_records).where(
                    cost_records.c.tenant_id == tenant, cost_records.c.model.is_not(None)
                )
            )
        )
    assert set(rolled) == {
        (today.date(), "alpha"),
        (today.date(), "beta"),
        (yesterday.date(), "alpha"),
    }
    for (day, model), row in rolled.items():
        mine = [r for r in records if r.model == model and r.recorded_at.date() == day]
        assert row.calls == len(mine) == 40
        assert row.input_tokens == sum(r.input_tokens for r in mine)
        assert row.output_tokens == sum(r.output_tokens for r in mine)
        assert Decimal(row.cost_usd) == sum((r.cost_usd or Decimal(0) for r in mine), Decimal(0))
        assert row.unpriced_calls == sum(1 for r in mine if r.unpriced)
    assert Decimal(rolled[(today.date(), "alpha")].cost_usd) == price * sum(range(1, 41))
    assert rolled[(today.date(), "beta")].unpriced_calls == 40
