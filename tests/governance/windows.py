"""What the tests of the limit windows share: a clock they move, a durable record they write,
and rows of the real one (tasks and their model calls' cost records)."""

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from uuid import UUID, uuid4

from sqlalchemy import insert

from app.chain import ToolType
from app.governance.limits import PastEntry
from app.storage import Database
from app.storage.tables import cost_records, tasks

REDIS_URL = os.environ.get("OMNIFORGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


class Clock:
    """Time that passes only when a test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Record:
    """A durable record the test writes: entries by window key. Counts its reads."""

    def __init__(self, entries: Mapping[str, Sequence[PastEntry]] | None = None) -> None:
        self.entries = {key: list(found) for key, found in (entries or {}).items()}
        self.reads: list[dict[str, float]] = []

    def add(self, key: str, entry: PastEntry) -> None:
        self.entries.setdefault(key, []).append(entry)

    async def __call__(self, since: Mapping[str, float]) -> dict[str, list[PastEntry]]:
        self.reads.append(dict(since))
        return {
            key: [e for e in self.entries.get(key, []) if e.at >= start]
            for key, start in since.items()
        }


async def recorded_task(
    database: Database,
    tenant: str,
    *,
    api_key_id: UUID | None = None,
    parent_task_id: UUID | None = None,
    created_at: datetime | None = None,
) -> UUID:
    """A stored task (a submission, or with `parent_task_id` a sub-agent's task)."""
    task_id = uuid4()
    async with database.transaction() as connection:
        await connection.execute(
            insert(tasks).values(
                id=task_id,
                tenant_id=tenant,
                user_id="u",
                status="working",
                chain_id=uuid4(),
                request={"input": "x"},
                model="m",
                last_seq=0,
                api_key_id=api_key_id,
                parent_task_id=parent_task_id,
                created_at=created_at or datetime.now(UTC),
            )
        )
    return task_id


async def record_call(
    database: Database,
    tenant: str,
    task_id: UUID,
    cost: Decimal,
    *,
    correlation_id: UUID | None = None,
    at: datetime | None = None,
    tool_type: ToolType = ToolType.LLM,
) -> UUID:
    """A call's cost record (10 input and 5 output tokens), as a run's writer stores it."""
    correlation_id = correlation_id or uuid4()
    async with database.transaction() as connection:
        await connection.execute(
            insert(cost_records).values(
                tenant_id=tenant,
                user_id="u",
                task_id=task_id,
                chain_id=uuid4(),
                step_id=uuid4(),
                correlation_id=correlation_id,
                tool_name="llm" if tool_type is ToolType.LLM else "tool",
                tool_type=tool_type.value,
                model="m",
                input_tokens=10,
                output_tokens=5,
                cost_usd=cost,
                unpriced=False,
                recorded_at=at or datetime.now(UTC),
            )
        )
    return correlation_id
