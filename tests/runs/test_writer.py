"""The writer's policy, on a real database with real agent runs: what the database refuses is
isolated at once and ends only its own run (with its closing events and its costs stored);
what a retry can cure is told apart from what it cannot."""

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, OperationalError

from app.agents import AgentTask, CoTAgent, ReasoningEngine
from app.chain import ChainStatus, ErrorCode, ReasoningChain, TaskState, ToolType
from app.chain.models import utc_now
from app.runs import RunChannel, StreamEvent
from app.runs.audit import ToolAuditor
from app.runs.live import LiveRun
from app.runs.metrics import RunLabels, RunMetrics
from app.runs.recorder import RunRecorder
from app.runs.writer import RunWriter
from app.security.visibility import ReaderView, VisibilityPolicy
from app.storage import Database
from app.storage.errors import is_transient
from app.storage.records import StoredEvent, StoredRelay, StoredStep
from app.storage.runs import Fence, RunStores
from app.storage.tables import cost_records, tasks
from app.tools.builtin import builtin_tools
from app.tools.executor import ToolExecutor
from app.tools.recording import CostRecord
from app.tools.registry import ToolRegistry
from tests.factories import stored_task

# A step number no database column takes (past 64 bits): the database refuses the row.
UNSTORABLE_NUMBER = 2**70


@pytest.fixture
def tenant() -> str:
    """A tenant id of this test's own database (no tenant row is needed here)."""
    return f"t-{uuid4().hex[:12]}"


class Gated(CoTAgent):
    """Thinks, then waits for its gate before concluding."""

    agent_id = "gated"

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__(ToolExecutor(ToolRegistry(builtin_tools())), default_model="demo")
        self.gate = gate

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        engine.add_thinking("thinking it over")
        await self.gate.wait()
        engine.add_synthesis("done", [])


async def _live(stores: RunStores, tenant: str, gate: asyncio.Event) -> LiveRun:
    chain = ReasoningChain(task_id="pending", agent_id=Gated.agent_id, tenant_id=tenant)
    task_id, _ = await stored_task(
        stores.queue, tenant, chain_id=chain.id, status=TaskState.SUBMITTED, runner_id="me"
    )
    chain.task_id = str(task_id)
    run = Gated(gate).start(AgentTask(id=str(task_id), input="x", tenant_id=tenant), chain=chain)
    view = ReaderView(VisibilityPolicy(), roles=frozenset(), full_access=False, sensitive_fields=())
    auditor = ToolAuditor(chain=chain, actor="alice", redactor=view, audit_levels={})
    recorder = RunRecorder(task_id, tenant, chain, auditor, fence=Fence("me", 1))
    return LiveRun(task_id, run, recorder, RunLabels(tenant, "demo"))


def _cost(live: LiveRun, usd: str) -> CostRecord:
    return CostRecord(
        task_id=str(live.task_id),
        chain_id=live.recorder.chain.id,
        step_id=uuid4(),
        correlation_id=uuid4(),
        tool_name="llm",
        tool_type=ToolType.LLM,
        tenant_id=live.recorder.tenant_id,
        user_id="alice",
        model="demo",
        deployment="demo",
        provider="omniforge_demo",
        input_tokens=10,
        output_tokens=5,
        cost_usd=Decimal(usd),
        unpriced=False,
    )


# The runs' event readers: held, since a reader that goes away cancels its run.
_READERS: list[Any] = []


async def _first_batch(live: LiveRun, costs: list[CostRecord]) -> tuple[Any, Any]:
    """The run's first events (chain_started, working, its thinking step) as recorded."""
    batches = live.run.event_batches()
    _READERS.append(batches)
    events: list[Any] = []
    while not any(event.type == "reasoning_step" for event in events):
        events.extend(await anext(batches))
    return live.recorder.record(events, costs)


def _metric(metrics: RunMetrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


async def _followed(channel: RunChannel) -> list[StreamEvent]:
    """Every event a follower from the start reads (these runs push no deltas)."""
    events: list[StreamEvent] = []
    async for item in channel.follow():
        assert isinstance(item, StreamEvent), item
        events.append(item)
    return events


def _seq_and_type(stored: StoredEvent | StoredStep | StoredRelay) -> tuple[int, str]:
    assert not isinstance(stored, StoredRelay), stored  # these runs have no sub-agents
    return stored.seq, stored.type


async def _task_row(database: Database, task_id: UUID) -> Any:
    async with database.read() as connection:
        return (await connection.execute(select(tasks).where(tasks.c.id == task_id))).one()


async def test_a_refused_write_ends_only_its_run_at_once_with_its_end_and_costs_stored(
    database: Database, tenant: str
) -> None:
    stores = RunStores.of(database)
    metrics = RunMetrics()
    writer = RunWriter(stores.writes, metrics, audit_flush_s=0)
    gate = asyncio.Event()
    bad, good = await _live(stores, tenant, gate), await _live(stores, tenant, gate)
    bad_write, bad_events = await _first_batch(bad, [_cost(bad, "0.25")])
    good_write, good_events = await _first_batch(good, [_cost(good, "0.5")])
    bad_write.steps[0]["step_number"] = UNSTORABLE_NUMBER

    # Queued together: one group, which the database refuses as a whole at first.
    writer.queue_batch(bad, bad_write, bad_events, last=False)
    writer.queue_batch(good, good_write, good_events, last=False)
    audited = asyncio.ensure_future(
        writer.record_audit(
            [
                {
                    "tenant_id": tenant,
                    "actor": "bob",
                    "action": "chain.read",
                    "resource_type": "chain",
                    "resource_id": "x",
                    "details": {},
                    "created_at": utc_now(),
                }
            ]
        )
    )
    ended = await _followed(bad.channel)
    await audited
    gate.set()
    bad_chain = await bad.run.wait()
    await writer.close()

    # No retry: a refused row is not a failure time can cure.
    assert _metric(metrics, "omniforge_storage_retries_total") == 0
    assert _metric(metrics, "omniforge_storage_refused_total", what="run") == 1
    # The bad run: ended after its last stored event (none), its costs kept, its agent stopped.
    assert [(e.seq, e.type) for e in ended] == [(1, "chain_failed"), (2, "done")]
    row = await _task_row(database, bad.task_id)
    assert (row.status, row.error_code, row.last_seq) == ("failed", ErrorCode.INTERNAL_ERROR, 2)
    stored = await stores.streams.replay(
        tenant, bad.task_id, bad.recorder.chain.id, after=0, limit=10
    )
    assert [_seq_and_type(s) for s in stored] == [(1, "chain_failed"), (2, "done")]
    assert bad_chain.status is ChainStatus.FAILED
    assert bad.stored.is_set()
    # The good run and the audit row of the same group: stored and published.
    good_stored = await stores.streams.replay(
        tenant, good.task_id, good.recorder.chain.id, after=0, limit=10
    )
    assert [s.seq for s in good_stored] == [e.seq for e in good_events]
    assert good.channel.last_seq == len(good_events)
    async with database.read() as connection:
        costs = (
            await connection.execute(
                select(cost_records.c.task_id, cost_records.c.cost_usd).where(
                    cost_records.c.task_id.in_([bad.task_id, good.task_id])
                )
            )
        ).all()
    assert {(c.task_id, Decimal(c.cost_usd)) for c in costs} == {
        (bad.task_id, Decimal("0.25")),
        (good.task_id, Decimal("0.5")),
    }


async def test_a_run_whose_events_cannot_be_recorded_is_ended_after_what_was_stored(
    database: Database, tenant: str
) -> None:
    stores = RunStores.of(database)
    writer = RunWriter(stores.writes, RunMetrics(), audit_flush_s=0)
    gate = asyncio.Event()
    live = await _live(stores, tenant, gate)
    write, events = await _first_batch(live, [])

    writer.queue_batch(live, write, events, last=False)
    writer.queue_end(live, "its events could not be recorded (ValueError)")
    streamed = await _followed(live.channel)
    await live.run.wait()
    await writer.close()

    count = len(events)
    assert [e.seq for e in streamed] == list(range(1, count + 3))
    assert [e.type for e in streamed[-2:]] == ["chain_failed", "done"]
    row = await _task_row(database, live.task_id)
    assert (row.status, row.error_code, row.last_seq) == (
        "failed",
        ErrorCode.INTERNAL_ERROR,
        count + 2,
    )
    assert row.error_message == "its events could not be recorded (ValueError)"


async def test_only_failures_a_retry_can_cure_count_as_transient(
    database: Database, own_database_url: str, tenant: str, tmp_path: Path
) -> None:
    stores = RunStores.of(database)
    gate = asyncio.Event()
    live = await _live(stores, tenant, gate)
    gate.set()
    await live.run.wait()
    write, _ = live.recorder.record([], [])
    write.task_changes["last_seq"] = UNSTORABLE_NUMBER
    write.last_seq = UNSTORABLE_NUMBER
    # Postgres refuses the value; SQLite's driver cannot even bind it.
    with pytest.raises((DBAPIError, OverflowError)) as refused:
        await stores.writes.append([write])
    assert not is_transient(refused.value)

    unreachable = Database(
        "postgresql+asyncpg://postgres@127.0.0.1:1/none"
        if "postgresql" in own_database_url
        else f"sqlite+aiosqlite:///{tmp_path}"  # a directory: no database opens there
    )
    try:
        with pytest.raises((OperationalError, ConnectionRefusedError)) as down:
            async with unreachable.read() as connection:
                await connection.execute(select(tasks.c.id))
    finally:
        await unreachable.dispose()
    assert is_transient(down.value)
