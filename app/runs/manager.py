"""RunManager: the runs of this process, put together from parts with one job each. A task's
data flows one way through them:

    admission -> the store's queue -> queue (claims) -> starter -> active runs -> writer
                                                                   (channels)

- `Admission` checks a submission and stores it with its chain, in the queue, or claimed by
  this instance when it has room (`RunQueue.reserve`).
- `RunQueue` claims queued tasks while there is room, woken by notices, and hands each to
- `RunStarter`, which starts the run (new, or resumed from its stored steps) or ends the task,
  and hands the run to
- `ActiveRuns`, which numbers its events and queues them for the one `RunWriter`, which stores
  them in group commits and then publishes them on the run's channel; a released run's task
  goes back to the queue from there.
- `LeaseKeeper` keeps this runner's lease and gives the runs of runners that are gone back to
  the queue; `ApprovalTimeouts` denies the calls nobody decided on in time.

What crosses the parts is the cancel, which this class routes: to the run live here, to the
task waiting in the queue, or through the store to the instance that runs it."""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.agents import AgentRun, AgentRuntime
from app.chain import ErrorCode, TaskState
from app.governance.limits import InProcessLimitStore, LimitStore
from app.ids import uuid4
from app.observability.tracing import RunTracer
from app.runs.active import ActiveRuns
from app.runs.admission import Admission, Turn
from app.runs.agents import BUILTIN_AGENT, ResolvedAgent
from app.runs.approvals import ApprovalTimeouts
from app.runs.background import Background
from app.runs.channel import RunChannel
from app.runs.children import DEFAULT_MAX_DEPTH, ChildRuns
from app.runs.conversations import ConversationHistories
from app.runs.feeds import StoredFeeds
from app.runs.leases import LeaseKeeper
from app.runs.live import LiveRun, LiveRuns
from app.runs.metrics import RunMetrics
from app.runs.models import Attachment, Origin, RunPolicy, TaskSubmission
from app.runs.outage import StoreGate
from app.runs.queue import RunQueue
from app.runs.starter import RunLoader, RunStart, RunStarter
from app.runs.waiters import TaskWaiters
from app.runs.writer import RunWriter
from app.security import Principal
from app.storage.idempotency import KeyClaim
from app.storage.notify import APPROVALS, CANCEL, EVENTS, QUEUE
from app.storage.records import TaskRecord
from app.storage.runs import RunStores

logger = logging.getLogger(__name__)

CANCEL_WAIT_S = 1.5
"""How long a cancel waits for the run's end to be stored before it answers that it is asked
(the run's instance may be stopping or gone: whoever runs the task next ends it)."""


@dataclass(frozen=True, slots=True)
class SubmittedTask:
    task_id: UUID
    chain_id: UUID
    status: TaskState


class RunManager:
    """The runs of this process, taken from the queue every instance shares, run by
    `runtime`. `live` holds the runs live here and is the runtime's `CostRecorder` (a run's
    cost records are written in the same transaction as the steps that follow them): build
    the runtime with it. `loader` rebuilds what a task accepted by another instance (or
    before a restart) starts from; without one such tasks cannot be resumed here.

    A submitted task is stored in the queue (`submitted`, no owner); any instance with room
    claims it (woken by a notice, never polling), runs it and records its events. A run whose
    instance stops is given back to the queue (on `stop`, or by the others once its lease
    lapses) and resumed by whoever claims it next, from its stored steps."""

    def __init__(
        self,
        stores: RunStores,
        runtime: AgentRuntime,
        *,
        live: LiveRuns | None = None,
        loader: RunLoader | None = None,
        heartbeat_s: float = 10.0,
        audit_flush_s: float = 0.2,
        limits: LimitStore | None = None,
        metrics: RunMetrics | None = None,
        max_runs: int = 1000,
        max_submissions: int = 16,
        resume: bool = True,
        max_resumes: int = 3,
        approval_timeout_s: float = 86_400.0,
        tracer: RunTracer | None = None,
        max_agent_depth: int = DEFAULT_MAX_DEPTH,
        store_outage_s: float = 300.0,
    ) -> None:
        self._stores = stores
        # Tenants' windows (submissions, calls, tokens, cost), shared by every instance when
        # the store is.
        self.limits: LimitStore = limits or InProcessLimitStore()
        self.metrics = metrics or RunMetrics()
        # Whether the store takes writes: runs pause their calls while it does not.
        self.gate = StoreGate()
        # Conversations' histories, kept from turn to turn.
        self.histories = ConversationHistories()
        self._waiters = TaskWaiters()
        self._writer = RunWriter(
            stores.writes,
            self.metrics,
            self.gate,
            audit_flush_s=audit_flush_s,
            outage_s=store_outage_s,
        )
        self.leases = LeaseKeeper(
            stores.runners,
            stores.queue,
            heartbeat_s=heartbeat_s,
            holds=self._holds,
            lost=self._lease_lost,
            gate=self.gate,
        )
        me = self.leases.runner_id
        self.runtime = runtime
        # Streams of runs another instance runs, read once for all their subscribers here.
        self.feeds = StoredFeeds(stores.streams, stores.queue, self.gate)
        self._admission = Admission(stores.queue, self.limits, self.metrics, runtime)
        self._active = ActiveRuns(
            stores.queue,
            stores.approvals,
            self._writer,
            self.metrics,
            self._waiters,
            me=me,
            ended=self._run_ended,
            runs=live,
            tracer=tracer,
            live_here=self.feeds.live_here,
        )
        self._active.know_tools(runtime.registry.list_tools())
        # Sub-agents' tasks run where their parents do; cancelling one goes the usual way.
        self._children = ChildRuns(
            stores.queue,
            self._admission,
            self._active,
            self._waiters,
            self.cancel,
            me=me,
            max_depth=max_agent_depth,
            streams=stores.streams,
        )
        self._starter = RunStarter(
            stores,
            self.limits,
            self._active,
            runtime,
            me=me,
            resume=resume,
            max_resumes=max_resumes,
            approval_timeout_s=approval_timeout_s,
            sub_agent_tools=self._children.tools,
            retry_later=lambda delay_s: self._queue.held_back(delay_s),
            loader=loader,
        )
        self._queue = RunQueue(
            stores.queue,
            me=me,
            max_runs=max_runs,
            running=self._active.__len__,
            launch=self._launch,
            gate=self.gate,
        )
        self._timeouts = ApprovalTimeouts(stores.approvals, retry_s=heartbeat_s)
        # Submissions stored and started at once; the rest wait their turn, in arrival order.
        self._submitting = asyncio.Semaphore(max_submissions)
        self._background = Background()
        # Set when this process begins to drain: streams end (their clients reconnect to
        # another instance) and nothing new starts here.
        self.draining = asyncio.Event()
        self._drain_began = 0.0
        self._drained = False
        self.metrics.count_active_runs(self._active.__len__)
        notices = stores.notices
        notices.listen(QUEUE, self._queued)
        notices.listen(EVENTS, self._waiters.stored)
        notices.listen(EVENTS, self.feeds.stored)
        notices.listen(CANCEL, self._cancel_requested)
        notices.listen(APPROVALS, lambda _: self._timeouts.asked())
        notices.on_reconnect.append(self._missed_notices)
        notices.on_reconnect.append(self.feeds.missed)
        # The database went away under this process: runs pause their calls at once, before a
        # write finds out.
        notices.on_lost.append(self.gate.failed)

    def _queued(self, _: str) -> None:
        """A `QUEUE` notice: tasks wait to be claimed (a sub-agent's by its parent's call)."""
        self._queue.queued()
        self._children.queued()

    @property
    def runner_id(self) -> str:
        return self.leases.runner_id

    @property
    def lease_s(self) -> float:
        return self.leases.lease_s

    @property
    def max_runs(self) -> int:
        return self._queue.max_runs

    async def start(self) -> None:
        """Registers this process as a runner, takes back the runs of runners that are gone,
        starts claiming from the queue, and keeps the lease renewed (each renewal also gives
        back to the queue the runs of runners whose lease lapsed)."""
        await self._stores.notices.start()
        await self.leases.start()
        self._queue.start()
        self._timeouts.start()

    async def _launch(self, task: TaskRecord) -> None:
        # A service is ready before its runtime has loaded LiteLLM (in the background): a run
        # claimed meanwhile waits for it, rather than loading it on the loop.
        try:
            await self.runtime.loaded()
        except Exception as exc:  # logged where it failed; /readyz says so too
            self._starter.forget(task.id)
            await self._starter.end_unstarted(
                task,
                TaskState.FAILED,
                ErrorCode.INTERNAL_ERROR,
                f"its run could not start: the LLM gateway did not load ({type(exc).__name__})",
            )
            return
        await self._starter.launch(task)

    @property
    def tool_sensitive_fields(self) -> frozenset[str]:
        """Every registered tool's sensitive field names: redacted for restricted readers."""
        return self._active.tool_sensitive_fields

    @property
    def active_runs(self) -> int:
        return len(self._active)

    @property
    def waiters(self) -> TaskWaiters:
        return self._waiters

    def channel(self, task_id: UUID) -> RunChannel | None:
        return self._active.channel(task_id)

    def followed(self, task_id: UUID, tenant_id: str) -> LiveRun | None:
        """The task's run, if it is live in this process and a reader of `tenant_id` may
        follow its stream without reading the task from the store."""
        return self._active.followed(task_id, tenant_id)

    def run(self, task_id: UUID) -> AgentRun | None:
        """The task's run, if it is live in this process."""
        return self._active.run(task_id)

    async def left(self, task_id: UUID) -> None:
        """Returns once no run of the task is live here (ended, handed over, or suspended
        for approvals, its events stored)."""
        await self._active.left(task_id)

    def validate(
        self, submission: TaskSubmission, policy: RunPolicy, agent: ResolvedAgent = BUILTIN_AGENT
    ) -> None:
        self._admission.validate(submission, policy, agent)

    async def record_audit(self, rows: list[dict[str, Any]]) -> None:
        """Stores audit rows with the next group the writer commits; returns once stored."""
        await self._writer.record_audit(rows)

    def queue_audit(self, rows: list[dict[str, Any]]) -> None:
        """Queues audit rows to be stored with the next group, at most `audit_flush_s` later."""
        self._writer.queue_audit(rows)

    async def submit(
        self,
        principal: Principal,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent = BUILTIN_AGENT,
        turn: Turn | None = None,
        attachments: Sequence[Attachment] = (),
        *,
        idempotency: KeyClaim | None = None,
        schedule_id: UUID | None = None,
        origin: Origin | None = None,
    ) -> SubmittedTask:
        """Stores the task and its chain in the queue, for any instance with room to run
        `agent` on it; returns once both rows exist. `attachments` are the files given to it
        (its own and its conversation's, checked to be its tenant's). Refuses (`RateLimited`)
        a task over its tenant's submission rate or concurrent runs, and
        (`ConversationBusy`) a turn while another turn of its conversation runs. With
        `idempotency`, `KeyTaken` when another task holds the key (nothing is started);
        `schedule_id` tags the firing of a schedule; `origin` makes it a replay or a fork of
        a recorded task."""
        self._admission.validate(submission, policy, agent)
        # A burst's submissions otherwise share the loop with every run they start, and the
        # last of them waits for the work of all (a completion tail of seconds).
        async with self._submitting:
            return await self._submit(
                principal,
                submission,
                policy,
                agent,
                turn,
                attachments,
                idempotency=idempotency,
                schedule_id=schedule_id,
                origin=origin,
            )

    async def _submit(
        self,
        principal: Principal,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent,
        turn: Turn | None,
        attachments: Sequence[Attachment],
        *,
        idempotency: KeyClaim | None = None,
        schedule_id: UUID | None = None,
        origin: Origin | None = None,
    ) -> SubmittedTask:
        grants = await self._admission.admit(principal.tenant_id, policy)
        task_id = uuid4()
        history = turn.history if turn is not None else [] if origin is None else origin.history
        self._starter.accept(
            task_id, RunStart(principal, submission, policy, agent, history, attachments)
        )
        # With room here it is claimed as it is stored, and started at once; otherwise it
        # waits in the queue for room here or on another instance.
        direct = self._queue.reserve(task_id)
        try:
            task = await self._admission.store(
                task_id,
                principal,
                submission,
                policy,
                agent,
                turn,
                attachments,
                owner=self.runner_id if direct else None,
                idempotency=idempotency,
                schedule_id=schedule_id,
                origin=origin,
            )
        except BaseException:
            self._starter.forget(task_id)
            self._queue.unreserve(task_id)
            await self._admission.give_back(grants)
            raise
        if direct and self.runtime.is_loaded:
            await self._queue.start_reserved(task)
        elif direct:
            # Just after start-up the runtime may still be loading LiteLLM (seconds): the
            # submission is answered at once, and the run starts once it has loaded.
            self._queue.start_reserved_soon(task)
        else:
            self._queue.queued()
        return SubmittedTask(task_id, task.chain_id, TaskState.SUBMITTED)

    # --- cancel ----------------------------------------------------------------------------

    async def cancel(self, task: TaskRecord, reason: str) -> bool | None:
        """Stops the task's run and returns once its end is stored: True when it ended
        `cancelled`, False when it reached another end first (the cancel lost the race), None
        when it has not ended within `CANCEL_WAIT_S` (its instance is stopping, unreachable or
        gone, or the store is unavailable): the cancel stays asked, and whoever runs the task
        next ends it without running it. A queued task is ended without ever starting; a run
        another instance holds is stopped by that instance, which a notice tells."""
        try:
            async with asyncio.timeout(CANCEL_WAIT_S):
                return await self._cancel(task, reason)
        except TimeoutError:
            return None

    async def _cancel(self, task: TaskRecord, reason: str) -> bool | None:
        live = self._active.get(task.id)
        if live is not None:
            live.run.cancel(reason)
            await live.stored.wait()
            if live.run.released:  # released as the cancel came: cancel it in the queue
                return await self._cancel(task, reason)
            return live.recorder.final_state is TaskState.CANCELLED
        ended = await self._cancel_queued(task.id, reason)
        if ended is not None:
            return ended
        queue = self._stores.queue
        with self._waiters.watch(task.id) as stored:
            asked = await queue.request_cancel(task.id, reason)
            if asked is None:
                return False
            while True:
                stored.clear()
                current = await queue.task(task.id)
                if current is None:
                    return False
                if current.is_finished:
                    return current.status is TaskState.CANCELLED
                if current.runner_id is None:  # back in the queue meanwhile
                    ended = await self._cancel_queued(task.id, reason)
                    if ended is not None:
                        return ended
                await stored.wait()

    async def _cancel_queued(self, task_id: UUID, reason: str) -> bool | None:
        """Ends the task without running it if it waits in the queue (claimed to end it):
        whether it ended `cancelled`; None when it was not waiting."""
        with self._active.claiming(task_id):
            queued = await self._stores.queue.claim_task(task_id, self.runner_id)
            if queued is None:
                return None
            self._starter.forget(task_id)
            return await self._starter.end_unstarted(
                queued, TaskState.CANCELLED, ErrorCode.CANCELLED, reason
            )

    def _cancel_requested(self, payload: str) -> None:
        """A `CANCEL` notice: a run of this instance is stopped with the reason stored."""
        try:
            task_id = UUID(payload)
        except ValueError:
            return
        if task_id in self._queue:
            self._starter.cancel_starting(task_id)
        if task_id in self._active:
            self._background.spawn(self._cancel_if_asked(task_id), f"cancel-{task_id}")

    def _missed_notices(self) -> None:
        """Notices may have been lost while the connection was down: everyone looks again."""
        self._queue.queued()
        self._waiters.wake_all()  # sub-agents' awaited tasks among them
        for live in self._active.all():
            self._background.spawn(self._cancel_if_asked(live.task_id), f"recheck-{live.task_id}")

    async def _cancel_if_asked(self, task_id: UUID) -> None:
        """Stops a run of this instance whose cancel is asked in the store."""
        task = await self._stores.queue.task(task_id)
        live = self._active.get(task_id)
        if task is not None and task.cancel_reason is not None and live is not None:
            live.run.cancel(task.cancel_reason)

    # --- leases, shutdown ------------------------------------------------------------------

    def _holds(self, task_id: UUID) -> bool:
        """Whether a task this runner owns is live or being started here (or may be: a
        claim of the queue's is under way, and its tasks are not known here yet)."""
        return self._active.holds(task_id) or task_id in self._queue or self._queue.claiming

    def _run_ended(self) -> None:
        self._queue.wake()  # there is room again

    async def shutdown(self, grace_s: float) -> None:
        """Ends every run of this process (`interrupted`) and waits up to `grace_s` for their
        ends to be stored: for tests that must leave nothing running, not for a deploy (that
        is `stop`, which hands runs over)."""
        await self._active.end_all("the server shut down", grace_s)

    def _lease_lost(self) -> None:
        """This runner's lease was given up by another (it was judged lapsed): every run here
        stops at once, writing nothing more, and what was being started is dropped; their
        tasks are back in the queue for whoever claims them."""
        self._active.let_go_all("lost", "this instance lost its lease")
        self._queue.drop_starting()

    def begin_drain(self) -> None:
        """Nothing new starts here from now on: no claim, and no call in any run (calls
        under way finish); streams of this process end, for their clients to reconnect
        elsewhere. Synchronous, so that a signal's handler can call it at once."""
        if self.draining.is_set():
            return
        self._drain_began = asyncio.get_running_loop().time()
        self.draining.set()
        self._queue.stop_claiming()
        self._active.release_runs()

    async def drain(self, grace_s: float) -> None:
        """A shutdown's drain (see `begin_drain`, which it calls if nobody did): lets each
        run's calls under way finish and be stored, and hands the runs over to the queue for
        another instance to resume at once — all within `grace_s` of the drain's beginning;
        a call still under way past it is cut (counted), and made again where its run is
        resumed. Idempotent."""
        if self._drained:
            return
        self._drained = True
        self.begin_drain()
        deadline = self._drain_began + grace_s
        await self._queue.stop()
        await self._timeouts.stop()
        await self._active.release_all(deadline)

    async def stop(self, grace_s: float) -> None:
        """Drains (see `drain`), then gives up the lease."""
        await self.drain(grace_s)
        await self.leases.stop_renewing()
        await self._background.cancel()
        await self._writer.close()
        await self.feeds.aclose()
        await self.leases.give_up()
        await self._stores.notices.aclose()
