"""A live run against a store that fails under it, on a Postgres of the test's own that it stops
the hard way: while the store cannot take writes the run starts no new call, the call under
way finishes and its result is stored once when the store is back; past the outage limit the
run is let go for a resume (never failed); a run whose task was claimed away by another runner
has its writes refused at the database and stops at once."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from app.agents import AgentTask, CoTAgent, ReasoningEngine
from app.chain import ReasoningChain, TaskState, ToolType
from app.chain.models import utc_now
from app.runs.active import ActiveRuns
from app.runs.live import LiveRun
from app.runs.metrics import RunMetrics
from app.runs.outage import StoreGate
from app.runs.waiters import TaskWaiters
from app.runs.writer import RunWriter
from app.storage import Database, upgrade_to_head
from app.storage.errors import StoreUnavailable
from app.storage.runs import RunnerLease, RunStores
from app.storage.tables import reasoning_steps, tasks
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from tests.factories import stored_task
from tests.faults import PrivatePostgres, private_postgres

ME = "runner-under-test"


class Probe(BaseTool):
    """A tool whose n-th call is announced as it starts and answers once let go. Idempotent:
    nothing but the store's outage holds its calls back (a call with side effects would
    also wait for its step to be stored)."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name="probe", type=ToolType.CUSTOM, description="Answers when let go.", idempotent=True
        )
        self.started: list[asyncio.Event] = [asyncio.Event() for _ in range(3)]
        self.answer: list[asyncio.Event] = [asyncio.Event() for _ in range(3)]
        self.calls = 0

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        number = self.calls
        self.calls += 1
        self.started[number].set()
        await self.answer[number].wait()
        return ToolOutput(f"answer {number}")


class CallsTwice(CoTAgent):
    agent_id = "calls-twice"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        await engine.call_tool("probe", {})
        await engine.call_tool("probe", {})
        engine.add_synthesis("done", [])


@dataclass
class Stage:
    """A runner's parts on a private Postgres it may stop."""

    server: PrivatePostgres
    database: Database
    stores: RunStores
    writer: RunWriter
    active: ActiveRuns
    metrics: RunMetrics
    tenant: str = field(default_factory=lambda: f"t-{uuid4().hex[:12]}")

    async def start_run(self, probe: Probe) -> LiveRun:
        agent = CallsTwice(ToolExecutor(ToolRegistry([*builtin_tools(), probe])), default_model="x")
        chain = ReasoningChain(task_id="pending", agent_id=agent.agent_id, tenant_id=self.tenant)
        task_id, _ = await stored_task(
            self.stores.queue, self.tenant, chain_id=chain.id, status=TaskState.SUBMITTED
        )
        [task] = [t for t in await self.stores.queue.claim(ME, 10) if t.id == task_id]
        chain.task_id = str(task_id)
        run = agent.start(AgentTask(id=str(task_id), input="x", tenant_id=self.tenant), chain=chain)
        return self.active.follow(run, task, chain, actor="alice", sensitive_fields=frozenset())

    def writes_open(self) -> bool:
        """Whether the writer's gate lets writes through, as of now."""
        return self.writer.gate.is_open

    async def store_goes_down(self) -> None:
        """Stops the database; the writer finds out at its next write (a request's audit
        row, which fails at once), and closes its gate."""
        await self.server.stop()
        row = {
            "tenant_id": self.tenant,
            "actor": "bob",
            "action": "chain.read",
            "resource_type": "chain",
            "resource_id": "x",
            "details": {},
            "created_at": utc_now(),
        }
        with pytest.raises(StoreUnavailable):
            await self.writer.record_audit([row])
        assert not self.writes_open()

    async def call_steps(self, task_id: UUID) -> int:
        async with self.database.read() as connection:
            statement = (
                select(func.count())
                .select_from(reasoning_steps)
                .join(tasks, tasks.c.chain_id == reasoning_steps.c.chain_id)
                .where(tasks.c.id == task_id, reasoning_steps.c.type == "tool_result")
            )
            return int(await connection.scalar(statement) or 0)


@pytest.fixture
async def stage() -> AsyncIterator[Stage]:
    async with private_postgres() as server:
        url = await server.create_database("outage")
        database = Database(url)
        await upgrade_to_head(database)
        stores = RunStores.of(database)
        await stores.runners.register(RunnerLease(ME, "host", 1, utc_now(), 30))
        metrics = RunMetrics()
        writer = RunWriter(stores.writes, metrics, StoreGate(), audit_flush_s=0, outage_s=30)
        active = ActiveRuns(
            stores.queue,
            stores.approvals,
            writer,
            metrics,
            TaskWaiters(),
            me=ME,
            ended=lambda: None,
        )
        try:
            yield Stage(server, database, stores, writer, active, metrics)
        finally:
            await writer.close()
            await database.dispose()


def _cut(metrics: RunMetrics, reason: str) -> float:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "omniforge_calls_cut_total" and sample.labels["reason"] == reason:
                return sample.value
    return 0.0


async def test_a_run_pauses_its_calls_through_an_outage_and_stores_the_call_under_way_once(
    stage: Stage,
) -> None:
    probe = Probe()
    live = await stage.start_run(probe)
    await asyncio.wait_for(probe.started[0].wait(), 10)
    await stage.store_goes_down()
    probe.answer[0].set()  # its result comes while nothing can be stored
    # The outage itself: the run must not start its next call while it lasts.
    await asyncio.sleep(1.5)
    assert not stage.writes_open()
    assert probe.calls == 1
    assert live.run.calls_under_way == 0
    await stage.server.start()
    await asyncio.wait_for(probe.started[1].wait(), 15)
    assert stage.writes_open()
    probe.answer[1].set()
    await asyncio.wait_for(live.stored.wait(), 15)

    assert probe.calls == 2
    assert live.recorder.final_state is TaskState.COMPLETED
    assert await stage.call_steps(live.task_id) == 2  # each result stored once
    events = await stage.stores.streams.replay(
        stage.tenant, live.task_id, live.recorder.chain.id, after=0, limit=100
    )
    assert [event.seq for event in events] == list(range(1, len(events) + 1))


async def test_an_outage_past_its_limit_lets_the_run_go_for_a_resume_without_failing_it(
    stage: Stage,
) -> None:
    stage.writer._outage_s = 0.5
    probe = Probe()
    live = await stage.start_run(probe)
    await asyncio.wait_for(probe.started[0].wait(), 10)
    await stage.store_goes_down()
    probe.answer[0].set()
    await asyncio.wait_for(live.stored.wait(), 15)  # let go: nothing more of it is written
    assert live.lost
    assert probe.calls == 1
    assert _cut(stage.metrics, "outage") == 1  # the call whose result could not be stored
    await stage.server.start()
    task = await stage.stores.queue.task(live.task_id)
    assert task is not None
    # Unfinished and held by its runner, for the runner's recovery to give back to the queue.
    assert not task.is_finished
    assert task.runner_id == ME


async def test_a_run_whose_task_was_claimed_away_has_its_writes_refused_and_stops(
    stage: Stage,
) -> None:
    probe = Probe()
    live = await stage.start_run(probe)
    await asyncio.wait_for(probe.started[0].wait(), 10)
    await stage.writer.flushed()
    stored_before = await stage.call_steps(live.task_id)
    # Judged lapsed elsewhere: its task went back to the queue and another runner took it.
    epoch = live.recorder.fence.epoch
    assert await stage.stores.queue.release(ME, {live.task_id: epoch}) == 1
    await stage.stores.runners.register(RunnerLease("successor", "host", 2, utc_now(), 30))
    [taken] = [t for t in await stage.stores.queue.claim("successor", 10) if t.id == live.task_id]
    assert taken.owner_epoch == epoch + 1
    probe.answer[0].set()  # the run goes on to its next call before its write is refused
    await asyncio.wait_for(live.stored.wait(), 15)
    assert live.lost
    assert probe.calls == 2
    await asyncio.wait_for(live.run.wait(), 10)  # stopped: the second call cut, unanswered
    assert await stage.call_steps(live.task_id) == stored_before
    # The first call's unstored result and the second call: the new holder makes both.
    assert _cut(stage.metrics, "lost") == 2
