"""Each stored shape of a run is declared once: the typed rows name exactly their table's
columns, the group write carries every column of `reasoning_steps` and `cost_records` with the
table's own type, and each value comes back whole through the read model (the stream's stored
steps, the cost records of a task), on both databases."""

import json
import typing
from datetime import UTC, datetime
from decimal import Decimal
from uuid import UUID, uuid4

import pytest

from app.chain import ReasoningStep, StepType, ToolCallInfo, ToolType
from app.storage import Database
from app.storage.costs import CostRepository
from app.storage.runs import Fence, RunStores, RunWrite
from app.storage.runs.group_write import GROUP_WRITE
from app.storage.runs.rows import AuditRow, CostRow, EventRow, StepRow, postgres_types
from app.storage.tables import audit_events, cost_records, reasoning_steps, task_events
from app.storage.types import RawJSON
from tests.factories import stored_task


@pytest.mark.parametrize(
    ("row", "table"),
    [
        (StepRow, reasoning_steps),
        (EventRow, task_events),
        (CostRow, cost_records),
        (AuditRow, audit_events),
    ],
)
def test_a_typed_row_names_exactly_its_tables_columns(row: type, table: typing.Any) -> None:
    written = set(typing.get_type_hints(row))
    assert written == set(postgres_types(table)), table.name


def test_the_group_write_carries_every_step_and_cost_column_with_the_tables_type() -> None:
    statement = GROUP_WRITE.text
    for table in (reasoning_steps, cost_records):
        for name, kind in postgres_types(table).items():
            assert f'"{name}" {kind}' in statement, (table.name, name)


async def test_every_step_and_cost_column_comes_back_whole_through_the_read_model(
    database: Database,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    stores = RunStores.of(database)
    task_id, chain_id = await stored_task(stores.queue, tenant, runner_id="r")
    step = ReasoningStep(
        type=StepType.TOOL_CALL,
        step_number=1,
        tool_call=ToolCallInfo(tool_type=ToolType.LLM, tool_name="llm", arguments={"a": 1}),
    )
    at = datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=UTC)
    step_row: StepRow = {
        "chain_id": chain_id,
        "step_number": 1,
        "id": step.id,
        "tenant_id": tenant,
        "seq": 1,
        "type": "tool_call",
        "tool_type": "llm",
        "tool_name": "llm",
        "visibility": "summary",
        "timestamp": at,
        "data": RawJSON(step.model_dump_json()),
        "metrics": RawJSON('{"llm_calls":1}'),
    }
    cost_row: CostRow = {
        "tenant_id": tenant,
        "user_id": "alice",
        "task_id": task_id,
        "chain_id": chain_id,
        "step_id": step.id,
        "correlation_id": uuid4(),
        "tool_name": "llm",
        "tool_type": "llm",
        "model": "fake-model",
        "deployment": "fake-deployment",
        "provider": "openai",
        "input_tokens": 11,
        "output_tokens": 7,
        "cost_usd": Decimal("0.000025000001"),
        "unpriced": False,
        "recorded_at": at,
        "strategy": "plan",
        "sandbox_s": Decimal("0.125"),
    }
    write = RunWrite(task_id, chain_id, Fence("r", 1), 0, 1, steps=[step_row], costs=[cost_row])
    assert await stores.writes.append([write]) == set()

    [stored] = await stores.streams.replay(tenant, task_id, chain_id, after=0, limit=10)
    document = json.loads(stored.step)  # type: ignore[union-attr]
    read_step = {
        # The read's own keys.
        "chain_id": chain_id,
        "tenant_id": tenant,
        # In the step's document.
        "id": UUID(document["id"]),
        "step_number": document["step_number"],
        # Columns of the stored step.
        "seq": stored.seq,
        "type": stored.type,  # type: ignore[union-attr]
        "tool_type": stored.tool_type,  # type: ignore[union-attr]
        "tool_name": stored.tool_name,  # type: ignore[union-attr]
        "visibility": stored.visibility,  # type: ignore[union-attr]
        "timestamp": stored.timestamp,  # type: ignore[union-attr]
        "data": json.loads(stored.step),  # type: ignore[union-attr]
        "metrics": json.loads(stored.metrics),  # type: ignore[union-attr]
    }
    expected_step = {
        **step_row,
        "data": json.loads(step_row["data"]),
        "metrics": json.loads(step_row["metrics"]),
    }
    assert set(read_step) == set(postgres_types(reasoning_steps))
    assert read_step == expected_step

    async with database.read() as connection:
        [record] = await CostRepository(connection, tenant).of_task(task_id)
    read_cost = record.model_dump(exclude={"id"})
    assert set(read_cost) == set(postgres_types(cost_records))
    assert read_cost == cost_row
