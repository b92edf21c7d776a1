"""The durable record of the limit windows, read from the database (SQLite and Postgres): a
tenant's (or its API key's) model calls by correlation id, within each window; the daily sums
of its deleted tasks' calls in its longer windows; its submissions; nothing for tool calls."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import uuid4

from sqlalchemy import insert

from app.chain import ToolType
from app.governance.limits import cost_units
from app.governance.quotas import DAY, HOUR, MINUTE
from app.governance.window_history import WindowHistory
from app.storage import Database
from app.storage.tables import purged_costs
from tests.governance.windows import record_call, recorded_task


async def test_a_windows_record_is_its_scopes_calls_deleted_calls_and_submissions(
    database_url: str,
) -> None:
    tenant, other = f"h-{uuid4().hex[:12]}", f"o-{uuid4().hex[:12]}"
    key_id = uuid4()
    database = Database(database_url)
    try:
        now = datetime.now(UTC)
        keyed = await recorded_task(database, tenant, api_key_id=key_id)
        plain = await recorded_task(database, tenant)
        await recorded_task(database, tenant, parent_task_id=plain)  # a sub-agent's task
        await recorded_task(database, tenant, created_at=now - timedelta(minutes=5))
        elsewhere = await recorded_task(database, other)
        half_hour = await record_call(
            database, tenant, keyed, Decimal("0.10"), at=now - timedelta(minutes=30)
        )
        two_hours = await record_call(
            database, tenant, plain, Decimal("0.05"), at=now - timedelta(hours=2)
        )
        seconds = await record_call(
            database, tenant, plain, Decimal("0.01"), at=now - timedelta(seconds=10)
        )
        await record_call(database, tenant, plain, Decimal("7"), tool_type=ToolType.EXTERNAL)
        await record_call(database, other, elsewhere, Decimal("9"))
        purged_at = now - timedelta(minutes=10)
        async with database.transaction() as connection:
            await connection.execute(
                insert(purged_costs).values(
                    tenant_id=tenant,
                    day=purged_at.date(),
                    model="m",
                    tool_name="llm",
                    tool_type=ToolType.LLM.value,
                    calls=3,
                    input_tokens=300,
                    output_tokens=30,
                    cost_usd=Decimal("0.30"),
                    unpriced_calls=0,
                    purged_at=purged_at,
                )
            )

        t = now.timestamp()
        key = f"{tenant}/api-key/{key_id}"
        record = await WindowHistory(database)(
            {
                f"{tenant}:cost_per_day_usd": t - DAY,
                f"{tenant}:tokens_per_hour": t - HOUR,
                f"{tenant}:llm_calls_per_minute": t - MINUTE,
                f"{tenant}:submissions": t - MINUTE,
                f"{tenant}:tool_calls_per_minute.external": t - MINUTE,
                f"{key}:cost_per_hour_usd": t - HOUR,
                f"{key}:submissions": t - MINUTE,
            }
        )

        def amounts(window: str) -> dict[str, int]:
            return {entry.id: entry.amount for entry in record[window]}

        deleted = f"purged:{purged_at.date()}:{purged_at.timestamp()}"
        assert amounts(f"{tenant}:cost_per_day_usd") == {
            str(half_hour): cost_units(Decimal("0.10")),
            str(two_hours): cost_units(Decimal("0.05")),
            str(seconds): cost_units(Decimal("0.01")),
            deleted: cost_units(Decimal("0.30")),
        }
        assert amounts(f"{tenant}:tokens_per_hour") == {
            str(half_hour): 15,
            str(seconds): 15,
            deleted: 330,
        }
        [purged] = [e for e in record[f"{tenant}:tokens_per_hour"] if e.id == deleted]
        assert purged.at == purged_at.timestamp()  # the latest its calls can have been made
        assert amounts(f"{tenant}:llm_calls_per_minute") == {str(seconds): 1}
        assert amounts(f"{tenant}:submissions") == {str(keyed): 1, str(plain): 1}
        assert f"{tenant}:tool_calls_per_minute.external" not in record
        assert amounts(f"{key}:cost_per_hour_usd") == {str(half_hour): cost_units(Decimal("0.10"))}
        assert amounts(f"{key}:submissions") == {str(keyed): 1}
    finally:
        await database.dispose()
