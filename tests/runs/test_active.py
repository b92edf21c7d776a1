"""A live run's record on a real database: a call that must not be made twice starts only once
its `tool_call` step is stored (a run resumed after a crash then knows it was made), while a
call that may be made again does not wait for the writer."""

import asyncio
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import select

from app.agents import AgentTask, CoTAgent, ReasoningEngine
from app.chain import ReasoningChain, TaskState, ToolType
from app.runs.active import ActiveRuns
from app.runs.channel import RunChannel
from app.runs.metrics import RunMetrics
from app.runs.waiters import TaskWaiters
from app.runs.writer import RunWriter
from app.storage import Database
from app.storage.runs import RunStores
from app.storage.tables import reasoning_steps
from app.tools.base import BaseTool
from app.tools.builtin import builtin_tools
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput
from app.tools.registry import ToolRegistry
from tests.factories import stored_task


class Probe(BaseTool):
    """Notes, the moment it starts, the last event of its run stored (published after its
    commit) and its own call step's id."""

    def __init__(self, name: str, *, idempotent: bool) -> None:
        self._definition = ToolDefinition(
            name=name,
            type=ToolType.CUSTOM,
            description="Records when it started.",
            idempotent=idempotent,
        )
        self.channel: RunChannel | None = None
        self.started: list[tuple[UUID, int]] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        assert self.channel is not None
        assert context.call_step is not None
        self.started.append((context.call_step.id, self.channel.last_seq))
        return ToolOutput("done")


class CallsBoth(CoTAgent):
    agent_id = "calls-both"

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        await engine.call_tool("place_order", {})
        await engine.call_tool("look_up", {})
        engine.add_synthesis("done", [])


async def test_a_call_with_side_effects_starts_only_once_its_step_is_stored(
    database: Database,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    stores = RunStores.of(database)
    metrics = RunMetrics()
    writer = RunWriter(stores.writes, metrics, audit_flush_s=0)
    active = ActiveRuns(
        stores.queue,
        stores.approvals,
        writer,
        metrics,
        TaskWaiters(),
        me="test",
        ended=lambda: None,
    )
    place, look = Probe("place_order", idempotent=False), Probe("look_up", idempotent=True)
    registry = ToolRegistry([*builtin_tools(), place, look])
    agent = CallsBoth(ToolExecutor(registry), default_model="demo")
    chain = ReasoningChain(task_id="pending", agent_id=agent.agent_id, tenant_id=tenant)
    task_id, _ = await stored_task(
        stores.queue, tenant, chain_id=chain.id, status=TaskState.SUBMITTED, runner_id="test"
    )
    chain.task_id = str(task_id)
    task = await stores.queue.task(task_id)
    assert task is not None

    run = agent.start(AgentTask(id=str(task_id), input="x", tenant_id=tenant), chain=chain)
    live = active.follow(run, task, chain, actor="alice", sensitive_fields=frozenset())
    place.channel = look.channel = live.channel
    await asyncio.wait_for(live.stored.wait(), 30)
    await writer.close()

    async with database.read() as connection:
        rows = await connection.execute(
            select(reasoning_steps.c.id, reasoning_steps.c.seq).where(
                reasoning_steps.c.chain_id == chain.id
            )
        )
        seq_of = {row.id: row.seq for row in rows}
    [(place_call, stored_at_place)] = place.started
    [(look_call, stored_at_look)] = look.started
    # The side-effecting call began with its step (and everything before it) stored.
    assert stored_at_place >= seq_of[place_call]
    # The repeatable one did not wait: its step was not yet stored when it began.
    assert stored_at_look < seq_of[look_call]
    assert live.recorder.final_state is TaskState.COMPLETED
