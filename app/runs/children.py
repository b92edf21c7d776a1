"""Sub-agents' runs: a call of a sub-agent tool starts a child task (its own task and chain,
linked to the call) in the process its parent runs in, and waits for its end.

A family runs where its first task runs: the queue never claims a sub-agent's task. Its
parent's call starts it, and a parent resumed after its instance stopped makes the call again
(sub-agent tools are idempotent): the child's id derives from the call, so the call finds the
child it started and resumes it (its stored steps replayed, nothing made twice) or, if it
ended meanwhile, answers from it. The same happens when a child that waited for a human's
decision is back in the queue: its waiting parent is woken (`queued`) and starts it.

The parent's chain adopts the child's (`ReasoningChain.adopt`): the child's usage counts in
its parent's and every ancestor's budget as it is made, and its calls are checked against
every ancestor's budget (`BudgetGuard`). A child's own budget is carved from what its parent
has left, narrowed by the call's cap and the child agent's own budget."""

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid5

from app.chain import (
    Budget,
    BudgetLimit,
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    TaskState,
    format_usd,
)
from app.chain.models import DataLabel
from app.resources.agents import AgentArchived
from app.runs.active import ActiveRuns
from app.runs.admission import Admission
from app.runs.agents import (
    ResolvedAgent,
    UnknownAgent,
    resolve_agent,
)
from app.runs.models import ChildColumns, FamilyLink, TaskSubmission
from app.runs.recorder import facts_of
from app.runs.starter import RunStart, RunStarter
from app.runs.waiters import TaskWaiters
from app.storage.records import TaskRecord
from app.storage.runs import StreamReads, TaskQueue
from app.storage.runs.queue import held_by
from app.tools.dataflow import PRIVATE, UNTRUSTED
from app.tools.errors import ToolError
from app.tools.models import ChildRun
from app.tools.subagents import SubAgentAnswer, SubAgentCall, SubAgentTool, sub_agent_ref

logger = logging.getLogger(__name__)

_LABELS: frozenset[str] = frozenset({UNTRUSTED, PRIVATE})

DEFAULT_MAX_DEPTH = 3
Cancel = Callable[[TaskRecord, str], Awaitable[bool | None]]


class ChildRuns:
    """Starts, resumes and awaits the sub-agents' tasks of this process's runs."""

    def __init__(
        self,
        queue: TaskQueue,
        admission: Admission,
        active: ActiveRuns,
        waiters: TaskWaiters,
        cancel: Cancel,
        *,
        me: str,
        max_depth: int = DEFAULT_MAX_DEPTH,
        streams: StreamReads | None = None,
    ) -> None:
        self.queue = queue
        self.streams = streams
        self.admission = admission
        self.active = active
        self.waiters = waiters
        self.cancel = cancel
        self.me = me
        self.max_depth = max_depth
        # The children some call here waits for: woken when tasks were queued, since one of
        # them may be back in the queue (only its parent starts it).
        self._awaited: set[UUID] = set()

    def queued(self) -> None:
        """Tasks were queued (or notices may have been missed): every awaited child is
        looked at again."""
        for child_id in self._awaited:
            self.waiters.wake(child_id)

    async def tools(
        self, starter: RunStarter, task: TaskRecord, chain: ReasoningChain, start: RunStart
    ) -> list[SubAgentTool]:
        """The sub-agent tools of a run whose agent lists other agents (`agent:name`): each
        described as its agent version is, when the run starts."""
        definition = start.agent.definition
        entries = definition.sub_agent_entries
        if not entries:
            return []
        path = (*(start.family.path if start.family else ()), start.agent.name)
        delegation = RunDelegation(self, starter, task, chain, start, path)
        tools = []
        async with self.queue.database.read() as connection:
            for entry in entries:
                ref = sub_agent_ref(entry)
                name = ref.partition("@")[0]
                policy = definition.sub_agents.get(name)
                try:
                    agent = await resolve_agent(connection, task.tenant_id, ref)
                except (UnknownAgent, AgentArchived) as exc:
                    # Called, it says so; the model is told the same up front.
                    description = f"(Unavailable: {exc}.)"
                    tools.append(SubAgentTool(entry, description, delegation))
                    continue
                # The version the model is told of (its description, its input schema) is
                # the one its calls run.
                delegation.agents[ref] = agent
                described = (policy.description if policy else None) or (
                    agent.definition.description or f"The agent {agent.name}."
                )
                tools.append(
                    SubAgentTool(
                        entry,
                        described,
                        delegation,
                        parameters=agent.definition.input_schema,
                        cap=None if policy is None else policy.budget,
                    )
                )
        return tools

    @contextlib.contextmanager
    def awaiting(self, child_id: UUID) -> Iterator[asyncio.Event]:
        self._awaited.add(child_id)
        try:
            with self.waiters.watch(child_id) as changed:
                yield changed
        finally:
            self._awaited.discard(child_id)


class RunDelegation:
    """The `Delegation` of one run: its sub-agent calls' children."""

    def __init__(
        self,
        children: ChildRuns,
        starter: RunStarter,
        task: TaskRecord,
        chain: ReasoningChain,
        start: RunStart,
        path: tuple[str, ...],
    ) -> None:
        self._children = children
        self._starter = starter
        self._task = task
        self._chain = chain
        self._start = start
        self._path = path
        # A run that goes on from stored steps may find the children its calls started; a
        # new run's calls are new (it looks nothing up).
        self._resumed = chain.resuming
        # The agents its sub-agent tools run, by reference, as resolved when it started.
        self.agents: dict[str, ResolvedAgent] = {}

    async def delegate(self, call: SubAgentCall) -> SubAgentAnswer:
        children = self._children
        # The same call of a resumed parent names the same child.
        child_id = uuid5(self._chain.id, str(call.context.correlation_id))
        child = await children.queue.task(child_id) if self._resumed else None
        if child is None:
            child = await self._start_child(call, child_id)
        call.context.started.append(ChildRun(task_id=child.id, chain_id=child.chain_id))
        try:
            child = await self._until_ended(child)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(child_id))
            raise
        answer = _answer(call.agent, child)
        return dataclasses.replace(answer, labels=await self._labels(child))

    async def _labels(self, child: TaskRecord) -> frozenset[DataLabel]:
        """What the child's run read, from its stored results: the parent's run holds it
        once the answer is in (one read of the child's steps per call)."""
        streams = self._children.streams
        if streams is None:
            return frozenset()
        labels: set[DataLabel] = set()
        for text in await streams.chain_steps(child.chain_id):
            if '"labels"' not in text:  # most steps carry none: no need to parse them
                continue
            result = json.loads(text).get("tool_result") or {}
            labels.update(label for label in result.get("labels", ()) if label in _LABELS)
        return frozenset(labels)

    async def _start_child(self, call: SubAgentCall, child_id: UUID) -> TaskRecord:
        children, parent = self._children, self._task
        name = call.agent.partition("@")[0]
        depth = parent.depth + 1
        if depth > children.max_depth:
            raise ToolError(
                f"agent {name!r} would run at depth {depth}: this service nests agents at most "
                f"{children.max_depth} deep (OMNIFORGE_MAX_AGENT_DEPTH)",
                error_code=ErrorCode.AGENT_DEPTH_EXCEEDED,
            )
        if name in self._path:
            cycle = " -> ".join((*self._path, name))
            raise ToolError(
                f"agent {name!r} already works above this call ({cycle}): an agent may not "
                "call itself, directly or through others",
                error_code=ErrorCode.AGENT_CYCLE,
            )
        agent = self.agents.get(call.agent)
        if agent is None:
            try:
                async with children.queue.database.read() as connection:
                    agent = await resolve_agent(connection, parent.tenant_id, call.agent)
            except (UnknownAgent, AgentArchived) as exc:
                raise ToolError(str(exc), error_code=ErrorCode.NOT_FOUND) from exc
        budget = self._carve(call.cap, agent)
        start = self._start
        submission = TaskSubmission(input=call.input, agent=agent.ref)
        link = FamilyLink(self._chain, self._path, facts_of(_call_step(call)))
        columns = ChildColumns(
            parent_task_id=parent.id,
            parent_step_id=_call_step(call).id,
            root_task_id=parent.root_task_id or parent.id,
            depth=depth,
            parent_chain_id=self._chain.id,
        )
        child_start = dataclasses.replace(
            start, submission=submission, agent=agent, history=[], attachments=(), family=link
        )
        self._starter.accept(child_id, child_start)
        # Stored as this process's own: held here until its run is live.
        with children.active.claiming(child_id):
            try:
                child = await children.admission.store(
                    child_id,
                    start.principal,
                    submission,
                    start.policy,
                    agent,
                    None,
                    (),
                    owner=children.me,
                    family=columns,
                    budget=budget,
                    parent=(parent.id, held_by(parent)),
                )
            except BaseException:
                self._starter.forget(child_id)
                raise
            await self._starter.launch(child)
        return child

    def _carve(self, cap: Budget | None, agent: ResolvedAgent) -> Budget | None:
        """The child's budget: what its parent (and each ancestor) has left, narrowed by the
        call's cap and the child agent's own budget. Refused (`budget_exceeded`) when
        nothing is left of a budget."""
        limits: dict[BudgetLimit, Any] = {}

        def narrow(limit: BudgetLimit, value: Any) -> None:
            if value is not None:
                current = limits.get(limit)
                limits[limit] = value if current is None else min(current, value)

        for owner in (self._chain, *self._chain.ancestors):
            for limit, value in owner.left().items():
                if value <= 0:
                    whose = "its" if owner is self._chain else f"task {owner.task_id}'s"
                    is_cost = limit is BudgetLimit.MAX_COST_USD
                    shown = f"${format_usd(Decimal(value))}" if is_cost else value
                    raise ToolError(
                        f"nothing is left of {whose} budget {limit} to give agent "
                        f"{agent.name!r} ({shown} left, calls under way counted)",
                        error_code=ErrorCode.BUDGET_EXCEEDED,
                    )
                narrow(limit, value)
        for bound in (cap, agent.definition.budget):
            if bound is not None:
                for limit in BudgetLimit:
                    narrow(limit, getattr(bound, limit))
        return Budget(**limits) if limits else None

    async def _until_ended(self, child: TaskRecord) -> TaskRecord:
        """Waits for the child's end; starts it again whenever it waits in the queue (a
        resume, or after a human decided the calls it waited for)."""
        children = self._children
        with children.awaiting(child.id) as changed:
            while True:
                changed.clear()
                live = children.active.get(child.id)
                if live is not None:
                    await children.active.left(child.id)
                    ended = live.recorder.outcome
                    if ended is not None and not live.broken:
                        return child.model_copy(update=ended)  # as just stored
                current = await children.queue.task(child.id)
                if current is None:
                    raise ToolError(
                        f"the sub-agent's task {child.id} is gone", error_code=ErrorCode.NOT_FOUND
                    )
                if current.is_finished:
                    return current
                if current.runner_id is None and current.status in _STARTABLE:
                    with children.active.claiming(child.id):
                        claimed = await children.queue.claim_child(child.id, children.me)
                        if claimed is not None:
                            await self._resume(claimed)
                            continue
                await changed.wait()

    async def _resume(self, child: TaskRecord) -> None:
        start = await self._starter.load(child)
        calls = [s for s in self._chain.steps if s.id == child.parent_step_id]
        link = FamilyLink(self._chain, self._path, facts_of(calls[0]) if calls else None)
        self._starter.accept(child.id, dataclasses.replace(start, family=link))
        await self._starter.launch(child)

    async def _stop(self, child_id: UUID) -> None:
        """The call was cancelled: its parent's run was cancelled (the child is too) or
        released for another instance (the child is released with it and resumed there)."""
        children = self._children
        live = children.active.get(self._task.id)
        if live is not None and live.run.released:
            return
        try:
            child = await children.queue.task(child_id)
            if child is not None and not child.is_finished:
                await children.cancel(child, "its parent task was cancelled")
        except Exception:
            logger.exception("cancelling sub-agent task %s failed", child_id)


_STARTABLE = (TaskState.SUBMITTED, TaskState.WORKING)


def _call_step(call: SubAgentCall) -> ReasoningStep:
    step = call.context.call_step
    assert step is not None, "the executor sets every call's step"
    return step


def _answer(agent: str, child: TaskRecord) -> SubAgentAnswer:
    usage = child.usage
    run = ChildRun(
        task_id=child.id,
        chain_id=child.chain_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        llm_calls=usage.llm_calls,
        cost_usd=usage.total_cost_usd,
        unpriced=usage.unpriced_calls > 0,
    )
    if child.status in (TaskState.COMPLETED, TaskState.INCOMPLETE):
        return SubAgentAnswer(run, child.final_answer, child.output, child.stop_reason)
    code = child.error_code or child.status
    raise ToolError(
        f"agent {agent!r} (task {child.id}) ended {child.status}: {code}: "
        f"{child.error_message or 'no message'}",
        error_code=ErrorCode.SUB_AGENT_FAILED,
        child=run,
    )
