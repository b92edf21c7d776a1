"""The runs live in this process and their channels: each run's events numbered as they come,
queued for the group writer (which stores, then publishes them on the run's channel), and,
once a run is released, its task handed back to the store."""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from uuid import UUID

from app.agents import AgentRun
from app.chain import DoneEvent, ErrorCode, ReasoningChain, ToolType
from app.observability.tracing import RunTracer
from app.resources.webhooks.subscriptions import RunWebhooks
from app.runs.audit import ToolAuditor
from app.runs.channel import Relay, RunChannel, StreamEvent
from app.runs.earlier_turns import repeats_earlier_turns
from app.runs.live import LiveRun, LiveRuns, output_to
from app.runs.metrics import RunLabels, RunMetrics
from app.runs.recorder import ChildEvent, RunRecorder, own_events
from app.runs.waiters import TaskWaiters
from app.runs.writer import RunWriter
from app.security.visibility import ReaderView, StepFacts, VisibilityPolicy
from app.storage.records import TaskRecord
from app.storage.runs import ApprovalWrites, TaskQueue
from app.storage.runs.queue import held_by
from app.tools.models import OutputDelta, ToolDefinition

logger = logging.getLogger(__name__)

DONE = "done"


class ActiveRuns:
    """The runs of this process by task id (`runs`, the runtime's cost recorder too). A run is
    followed from the moment it starts until its end (or hand-over) is stored; `ended` is
    called each time one leaves."""

    def __init__(
        self,
        queue: TaskQueue,
        approvals: ApprovalWrites,
        writer: RunWriter,
        metrics: RunMetrics,
        waiters: TaskWaiters,
        *,
        me: str,
        ended: Callable[[], None],
        runs: LiveRuns | None = None,
        tracer: RunTracer | None = None,
        live_here: Callable[[UUID], None] = lambda _: None,
    ) -> None:
        self._queue = queue
        self._approvals = approvals
        self._writer = writer
        self._metrics = metrics
        self._waiters = waiters
        self._me = me
        self._ended = ended
        # Told of each run that becomes live here (its followers move to its channel).
        self._live_here = live_here
        self._tracer = tracer
        self._runs = LiveRuns() if runs is None else runs
        # Draining: every run, and every run that starts from now on, starts no new call.
        self._releasing = False
        self._sensitive_fields: frozenset[str] = frozenset()
        self._audit_levels: dict[str, str] = {}
        # Tasks claimed here outside the queue (a sub-agent's, or one ended unstarted) whose
        # runs are not live yet, by how many claims of each are under way.
        self._claiming: dict[UUID, int] = {}

    def know_tools(self, definitions: Iterable[ToolDefinition]) -> None:
        """The registered tools: whose fields are redacted in audit rows, whose results kept."""
        definitions = list(definitions)
        self._sensitive_fields = frozenset(
            name for definition in definitions for name in definition.visibility.sensitive_fields
        )
        self._audit_levels = {d.name: d.permissions.audit_level for d in definitions}

    @property
    def tool_sensitive_fields(self) -> frozenset[str]:
        """Every registered tool's sensitive field names: redacted for restricted readers."""
        return self._sensitive_fields

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._runs

    def get(self, task_id: UUID) -> LiveRun | None:
        return self._runs.get(task_id)

    def holds(self, task_id: UUID) -> bool:
        """Whether the task's run is live here, or a claim of it here is under way."""
        return task_id in self._runs or task_id in self._claiming

    @contextlib.contextmanager
    def claiming(self, task_id: UUID) -> Iterator[None]:
        """While a task is claimed (or stored as this process's own) outside the queue and
        its run started or its end stored: the task is held here meanwhile, so the lease
        check does not give it back as a run this process lost."""
        self._claiming[task_id] = self._claiming.get(task_id, 0) + 1
        try:
            yield
        finally:
            left = self._claiming.pop(task_id) - 1
            if left:
                self._claiming[task_id] = left

    def all(self) -> list[LiveRun]:
        return list(self._runs.values())

    def channel(self, task_id: UUID) -> RunChannel | None:
        live = self._runs.get(task_id)
        return None if live is None else live.channel

    def followed(self, task_id: UUID, tenant_id: str) -> LiveRun | None:
        """The task's run, if it is live here and a reader of `tenant_id` may follow it from
        what is live alone (`LiveRun.followed_by`)."""
        live = self._runs.get(task_id)
        return live if live is not None and live.followed_by(tenant_id) else None

    def run(self, task_id: UUID) -> AgentRun | None:
        live = self._runs.get(task_id)
        return None if live is None else live.run

    async def left(self, task_id: UUID) -> None:
        """Returns once no run of the task is live here (ended, handed over, or suspended
        for approvals, its events stored)."""
        with self._waiters.watch(task_id) as changed:
            while task_id in self._runs:
                await changed.wait()
                changed.clear()

    def output_to(self, task_id: UUID) -> Callable[[OutputDelta], None]:
        return output_to(self._runs, task_id)

    def follow(
        self,
        run: AgentRun,
        task: TaskRecord,
        chain: ReasoningChain,
        *,
        actor: str,
        sensitive_fields: frozenset[str],
        webhooks: RunWebhooks | None = None,
        seen_as: tuple[ToolType, str] | None = None,
        call: StepFacts | None = None,
    ) -> LiveRun:
        """Records a just-started run's events as they come (nothing awaits between its start
        and this, so none is missed); `seen_as` for a remote agent's task recorded under a call
        of that tool; `call`, a sub-agent's, the facts of the call step that started it."""
        auditor = ToolAuditor(
            chain=chain,
            actor=actor,
            redactor=ReaderView(
                VisibilityPolicy(),
                roles=frozenset(),
                full_access=False,
                sensitive_fields=sensitive_fields | self._sensitive_fields,
            ),
            audit_levels=self._audit_levels,
        )
        fence = held_by(task)
        trace = (
            None
            if self._tracer is None
            else self._tracer.trace(task.id, task.tenant_id, chain.id, chain.agent_id)
        )
        recorder = RunRecorder(
            task.id,
            task.tenant_id,
            chain,
            auditor,
            fence=fence,
            last_seq=task.last_seq,
            trace=trace,
            webhooks=webhooks,
            seen_as=seen_as,
        )
        labels = RunLabels(task.tenant_id, run.task.model or "")
        channel = RunChannel(first_seq=task.last_seq + 1)
        live = LiveRun(
            task.id,
            run,
            recorder,
            labels,
            channel=channel,
            repeats_turns=repeats_earlier_turns(task),
        )
        if task.parent_task_id is not None:
            live.parent_task_id = task.parent_task_id
            calls = () if call is None else (call,)
            live.relay = Relay(task.id, chain.id, task.depth, task.parent_step_id, calls)
        run.store_with(live.stored_through, self._writer.gate.wait_open)
        self._runs[task.id] = live
        self._live_here(task.id)
        if self._releasing:
            run.release()
        live.reader = asyncio.create_task(self._record(live), name=f"record-{task.id}")
        return live

    async def _record(self, live: LiveRun) -> None:
        """Numbers a run's events batch by batch and queues them for the writer; ends when
        the run's end is stored. A run whose events cannot be recorded is ended by the writer
        (`internal_error`), after what was queued of it. A released run's task goes back to
        the queue once what it recorded is stored."""
        try:
            # aclosing: if this fails, closing the batches stops the run at once.
            async with contextlib.aclosing(live.run.event_batches()) as batches:
                async for batch in batches:
                    if live.broken:
                        break
                    costs, live.costs = live.costs, []
                    write, events = live.recorder.record(batch, costs)
                    self._metrics.observe(live.labels, own_events(batch))
                    last = isinstance(batch[-1], DoneEvent)
                    self._writer.queue_batch(live, write, events, last=last)
                    if live.relay is not None:
                        self._relay(live, live.relay, events)
            if live.run.released and not live.broken:
                await self._hand_over(live)
        except Exception as exc:
            logger.exception("recording task %s failed; its run is ended", live.task_id)
            self._writer.queue_end(live, f"its events could not be recorded ({type(exc).__name__})")
        try:
            await live.stored.wait()
        finally:
            self._runs.pop(live.task_id, None)
            if live.recorder.trace is not None:
                live.recorder.trace.close()
            self._waiters.wake(live.task_id)
            self._ended()

    def _relay(self, live: LiveRun, relay: Relay, events: list[StreamEvent]) -> None:
        """A sub-agent's events, in each ancestor's stream too, after what that ancestor
        emitted so far (and so stored after the child's own, which are queued first). Not
        its `done`, which would end its ancestors' streams, nor what it relays itself: each
        ancestor has its grandchildren's events from them directly. An ancestor not live here
        (a family runs where its first task does) or whose events have ended gets none."""
        own = [event for event in events if event.relay is None and event.type != DONE]
        parent_id = live.parent_task_id
        while own and parent_id is not None:
            ancestor = self._runs.get(parent_id)
            if ancestor is None or ancestor.broken:
                return
            for event in own:
                ancestor.run.relay(ChildEvent(relay, event))
            parent_id = ancestor.parent_task_id
            if ancestor.relay is not None:  # one more call above it for the next ancestor
                relay = relay.under(ancestor.relay.calls)

    async def _hand_over(self, live: LiveRun) -> None:
        """A released run: once everything it queued is stored, its task goes back to the
        queue (a resume by whoever claims it) and its followers read on from the store. A
        run suspended for approvals leaves its task waiting, owned by nobody, until they are
        decided."""
        try:
            await self._writer.flushed()  # behind everything queued before it
            fence = live.recorder.fence
            if live.lost:
                pass  # nothing of it is written any more: its task is another run's
            elif live.run.suspended:
                await self._approvals.suspend(live.task_id, fence)
            else:
                await self._queue.release(self._me, {live.task_id: fence.epoch})
        except Exception:  # the lease check gives it back once this instance is gone
            logger.warning("handing task %s back to the queue failed", live.task_id, exc_info=True)
        live.channel.close()
        live.stored.set()

    async def end_all(self, reason: str, grace_s: float) -> None:
        """Ends every run here (`interrupted`) and waits up to `grace_s` for their ends to be
        stored."""
        lives = self.all()
        for live in lives:
            live.run.cancel(reason, ErrorCode.INTERRUPTED)
        await wait_stored(lives, grace_s)

    def let_go_all(self, reason: str, why: str) -> None:
        """Stops every run here at once, writing nothing more of them (this process lost its
        lease: their tasks are others' to go on with)."""
        for live in self.all():
            live.let_go(self._metrics, reason, why)

    def release_runs(self) -> None:
        """Every run here, and every run that starts here from now on, starts no further
        call: each is released once its calls under way have their results (synchronous:
        callable from a signal)."""
        self._releasing = True
        for live in self.all():
            live.run.release()

    async def release_all(self, deadline: float, *, hand_over_s: float = 0.1) -> None:
        """Drains: each run starts no further call, lets the calls under way finish and be
        stored, and hands its task over, by `deadline` (the event loop's time); a run still
        in a call when only `hand_over_s` is left is cut there (its calls under way counted,
        and made again by whoever resumes it). Returns once every hand-over is stored, or the
        deadline has passed."""
        loop = asyncio.get_running_loop()
        self.release_runs()
        lives = self.all()
        pending = await wait_stored(lives, max(deadline - loop.time() - hand_over_s, 0.0))
        for live in pending:
            cut = live.run.calls_under_way
            if cut:
                self._metrics.calls_cut.labels("shutdown").inc(cut)
                logger.warning(
                    "task %s: %d calls under way cut by the shutdown grace; they will be made "
                    "again where its run is resumed",
                    live.task_id,
                    cut,
                )
            live.run.release(now=True)
        await wait_stored(pending, max(deadline - loop.time(), 0.1))


async def wait_stored(lives: Sequence[LiveRun], timeout_s: float) -> list[LiveRun]:
    """Waits up to `timeout_s` for the runs' ends (or hand-overs) to be stored; returns those
    still going."""
    if not lives:
        return []
    waits = {asyncio.ensure_future(live.stored.wait()): live for live in lives}
    _, pending = await asyncio.wait(waits, timeout=timeout_s)
    for wait in pending:
        wait.cancel()
    return [waits[wait] for wait in pending]
