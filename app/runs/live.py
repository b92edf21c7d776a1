"""A run live in this process: what records it, what streams it, and whether it is stored."""

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from app.agents import AgentRun
from app.chain import StepType, ToolType, VisibilityLevel
from app.chain.events import OutputDeltaEvent
from app.runs.channel import LiveDelta, Relay, RunChannel
from app.runs.metrics import RunLabels, RunMetrics
from app.runs.recorder import RunRecorder
from app.security.visibility import StepFacts
from app.storage.runs import RunWrite
from app.storage.runs.rows import CostRow
from app.storage.text import dump_model
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.models import OutputDelta
from app.tools.recording import CostRecord

logger = logging.getLogger(__name__)

_RESULT = StepType.TOOL_RESULT.value

# A delta is shown as the `tool_call` step of its LLM call is: these are that step's facts.
_LLM_CALL_FACTS = {
    level: StepFacts(StepType.TOOL_CALL, ToolType.LLM, LLM_TOOL_NAME, level)
    for level in VisibilityLevel
}


@dataclass(slots=True)
class LiveRun:
    task_id: UUID
    run: AgentRun
    recorder: RunRecorder
    labels: RunLabels
    # Its stored events, in order: what is published here is in the database (a resumed
    # run's from the first it stores).
    channel: RunChannel = field(default_factory=RunChannel)
    costs: list[CostRecord] = field(default_factory=list)
    # Held so the event loop's weak reference is not the only one to the reading task.
    reader: asyncio.Task[None] | None = None
    # Set once the run's last event is stored, or its end has been written for it.
    stored: asyncio.Event = field(default_factory=asyncio.Event)
    # Its events can no longer be stored: nothing more of it is queued or written.
    broken: bool = False
    # Let go without an end: its task is another run's to go on with (this one's lease or
    # fence was lost, or the store stayed unavailable too long); nothing of it is written.
    lost: bool = False
    # Results of its calls that are stored (published).
    results_stored: int = 0
    # Cost rows of its batches that could not be stored, kept for the write that ends it.
    lost_costs: list[CostRow] = field(default_factory=list)
    # A sub-agent's run: its parent's task, and what marks its events in its ancestors'
    # streams.
    parent_task_id: UUID | None = None
    relay: Relay | None = None
    # Its prompts may repeat other tasks' steps (a conversation's turn, a replay or a fork):
    # a restricted reader of its stream must learn those first, from the store.
    repeats_turns: bool = False

    def published(self, write: RunWrite) -> None:
        """A batch of it is stored."""
        self.results_stored += sum(1 for step in write.steps if step["type"] == _RESULT)

    def let_go(self, metrics: RunMetrics, reason: str, why: str) -> None:
        """Stops the run at once, writing nothing more of it (its task is left as stored,
        for another run of it to go on from): no further call starts, and its followers read
        on from the store. Its calls under way, or made without their results stored, are
        counted as cut (`reason`): the next run of its task makes them again."""
        if self.lost:
            return
        self.lost = self.broken = True
        cut = self.run.calls_under_way + self.run.results_made - self.results_stored
        self.run.release(now=True)
        self.channel.close()
        self.stored.set()
        metrics.calls_cut.labels(reason).inc(cut)
        logger.warning("task %s's run stopped here (%s); calls cut: %d", self.task_id, why, cut)

    def followed_by(self, tenant_id: str) -> bool:
        """Whether a reader of `tenant_id` may follow this run's stream from what is live
        here alone, without reading its task from the store."""
        return self.recorder.tenant_id == tenant_id and not self.repeats_turns

    @property
    def stored_seq(self) -> int:
        """The last event of this run known to be stored."""
        return self.channel.last_seq

    async def stored_through(self, count: int) -> None:
        """Returns once the run's first `count` events are stored (published on its channel
        after their commit), or once nothing more of it will be."""
        await self.channel.reached(self.channel.first_seq - 1 + count)

    def stream_output(self, delta: OutputDelta) -> None:
        """Hands a piece of the run's output to its subscribers as an `output_delta` event,
        at once: it is never stored. A run whose events can no longer be stored streams no
        more (its end is numbered after what was stored, not after what it emitted)."""
        if self.broken:
            return
        event = OutputDeltaEvent(
            task_id=str(self.task_id),
            chain_id=self.recorder.chain.id,
            step_id=delta.step_id,
            correlation_id=delta.correlation_id,
            attempt=delta.attempt,
            kind=delta.kind,
            delta=delta.text,
        )
        self.channel.push(LiveDelta(delta.after, _LLM_CALL_FACTS[delta.level], dump_model(event)))


def output_to(runs: Mapping[UUID, LiveRun], task_id: UUID) -> Callable[[OutputDelta], None]:
    """Where a run started with `stream_output` hands its deltas: to the task's live run,
    looked up as each comes, since the run is started before the live run that records it
    exists (a delta of a run no longer live here has nobody to go to)."""

    def deliver(delta: OutputDelta) -> None:
        live = runs.get(task_id)
        if live is not None:
            live.stream_output(delta)

    return deliver


class LiveRuns(dict[UUID, LiveRun]):
    """The runs live in this process, by task id. Also the runtime's `CostRecorder`: a run's
    cost records wait on it, to be written in the same transaction as the steps that follow
    them; a record of a run not live here (it has just ended) is dropped."""

    async def record_cost(self, record: CostRecord) -> None:
        live = self.get(UUID(record.task_id))
        if live is not None:
            live.costs.append(record)
