"""What the database stored for a tenant's tasks, read after a scenario: per task its status,
the sequence numbers its events were stored under, its LLM calls' steps, its cost records and
its chain's stored cost. Read straight from the tables, not through the API: what instances
serve is what followers saw; this is what is there."""

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy import select

from app.storage import Database
from app.storage.tables import cost_records, reasoning_chains, reasoning_steps, task_events, tasks
from tests.chaos.llm import MARKER


@dataclass(frozen=True)
class StoredTask:
    """One task as stored. `seqs`: the sequence numbers of its steps and other events,
    sorted, repeats kept; `llm_calls`: its `tool_call` steps of LLM calls; `billed_calls`: its
    cost records naming a model (one per LLM call paid for); `billed_usd`: the sum of all its
    cost records; `chain_cost_usd`: its chain's stored `total_cost_usd` (None: no chain)."""

    task_id: str
    marker: int | None
    status: str
    runner_id: str | None
    resumes: int
    last_seq: int
    seqs: tuple[int, ...]
    steps: int
    llm_calls: int
    billed_calls: int
    billed_usd: Decimal
    chain_cost_usd: Decimal | None


@dataclass
class _Rows:
    seqs: list[int]
    steps: int = 0
    llm_calls: int = 0
    billed_calls: int = 0
    billed_usd: Decimal = Decimal(0)


async def read_ledger(database_url: str, tenant: str) -> dict[str, StoredTask]:
    """Every task of `tenant`, by id."""
    database = Database(database_url)
    try:
        async with database.read() as connection:

            async def rows(*columns: Any, table: Any) -> list[Any]:
                statement = select(*columns).where(table.c.tenant_id == tenant)
                return list((await connection.execute(statement)).all())

            task_rows = await rows(tasks, table=tasks)
            chains = await rows(
                reasoning_chains.c.id,
                reasoning_chains.c.task_id,
                reasoning_chains.c.metrics,
                table=reasoning_chains,
            )
            steps = await rows(
                reasoning_steps.c.chain_id,
                reasoning_steps.c.seq,
                reasoning_steps.c.type,
                reasoning_steps.c.tool_type,
                table=reasoning_steps,
            )
            events = await rows(task_events.c.task_id, task_events.c.seq, table=task_events)
            costs = await rows(
                cost_records.c.task_id,
                cost_records.c.model,
                cost_records.c.cost_usd,
                table=cost_records,
            )
    finally:
        await database.dispose()

    by_task: dict[UUID, _Rows] = defaultdict(lambda: _Rows([]))
    task_of_chain = {chain.id: chain.task_id for chain in chains}
    chain_cost = {chain.task_id: _usd(chain.metrics.get("total_cost_usd")) for chain in chains}
    for step in steps:
        found = by_task[task_of_chain[step.chain_id]]
        found.seqs.append(step.seq)
        found.steps += 1
        found.llm_calls += step.type == "tool_call" and step.tool_type == "llm"
    for event in events:
        by_task[event.task_id].seqs.append(event.seq)
    for cost in costs:
        found = by_task[cost.task_id]
        found.billed_calls += cost.model is not None
        found.billed_usd += cost.cost_usd or Decimal(0)
    return {
        str(task.id): _stored(task, by_task[task.id], chain_cost.get(task.id)) for task in task_rows
    }


def _stored(task: Any, found: _Rows, chain_cost: Decimal | None) -> StoredTask:
    text = (task.request or {}).get("input")
    marker = MARKER.search(text) if isinstance(text, str) else None
    return StoredTask(
        task_id=str(task.id),
        marker=int(marker.group(1)) if marker else None,
        status=task.status,
        runner_id=task.runner_id,
        resumes=task.resumes,
        last_seq=task.last_seq,
        seqs=tuple(sorted(found.seqs)),
        steps=found.steps,
        llm_calls=found.llm_calls,
        billed_calls=found.billed_calls,
        billed_usd=found.billed_usd,
        chain_cost_usd=chain_cost,
    )


def _usd(value: object) -> Decimal | None:
    return None if value is None else Decimal(str(value))
