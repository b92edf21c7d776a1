"""RunManager: takes tasks from the queue every instance shares, runs each as an asyncio task of
this process, records its events as they happen (the writer stores, then publishes them), and
owns cancellation, hand-over and resume."""

import asyncio
import contextlib
import functools
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from app.agents import AgentRun, AgentRuntime, AgentTask
from app.chain import (
    Budget,
    BudgetLimit,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    TaskState,
)
from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.governance.budgets import BudgetGuard
from app.governance.limits import InProcessLimitStore, LimitStore
from app.governance.models import ModelPolicyGuard
from app.governance.quotas import (
    QuotaGuard,
    QuotaRefusal,
    RateLimited,
    admit_submission,
    remember,
)
from app.runs.agents import BUILTIN_AGENT, ResolvedAgent
from app.runs.approvals import approval_row, decided_event, decision_of
from app.runs.audit import ToolAuditor
from app.runs.channel import RunChannel
from app.runs.conversations import ConversationHistories
from app.runs.errors import (
    InvalidSubmission,
    ModelNotApproved,
    ToolsNotPermitted,
)
from app.runs.live import LiveRun, output_to
from app.runs.metrics import RunLabels, RunMetrics
from app.runs.models import Attachment, RunPolicy, TaskSubmission
from app.runs.recorder import RunRecorder, closing_events, event_row
from app.runs.waiters import TaskWaiters
from app.runs.writer import RunWriter
from app.security import Principal
from app.security.visibility import ReaderView, VisibilityPolicy
from app.storage.approvals import ApprovalRecord
from app.storage.notify import APPROVALS, CANCEL, EVENTS, QUEUE
from app.storage.records import TaskRecord
from app.storage.run_log import RunLog, RunnerLease, TooManyUnfinished
from app.storage.text import dump_model
from app.storage.types import RawJSON
from app.tools.approvals import ApprovalGate, ApprovalStatus, PendingApproval, timeout_of
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.errors import FieldError
from app.tools.guards import ToolGuard
from app.tools.permissions import permits
from app.tools.recording import CostRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubmittedTask:
    task_id: UUID
    chain_id: UUID
    status: TaskState


@dataclass(frozen=True, slots=True)
class Turn:
    """A task that continues a conversation: the history its run starts from, rebuilt from
    the `turns` turns stored before it (the conversation must still have exactly that many
    when the task is stored, and none unfinished)."""

    conversation_id: UUID
    turns: int
    history: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RunStart:
    """What a task's run is started from: who submitted it and what they may do, what they
    submitted, its agent version, the conversation before it and its files. The instance
    that accepted the task has it at hand; any other rebuilds it from the stored task
    (`RunLoader`)."""

    principal: Principal
    submission: TaskSubmission
    policy: RunPolicy
    agent: ResolvedAgent
    history: list[dict[str, Any]]
    attachments: Sequence[Attachment]


class Unresumable(Exception):
    """A stored task whose run cannot be started again (its agent version is gone...)."""


RunLoader = Callable[[TaskRecord], Awaitable[RunStart]]


class RunManager:
    """The runs of this process, taken from the queue every instance shares. Also the
    runtime's `CostRecorder`: a run's cost records are written in the same transaction as
    the steps that follow them.

    A submitted task is stored in the queue (`submitted`, no owner); any instance with room
    claims it (woken by a notice, never polling), runs it and records its events. A run whose
    instance stops is given back to the queue (on `stop`, or by the others once its lease
    lapses) and resumed by whoever claims it next, from its stored steps."""

    def __init__(
        self,
        log: RunLog,
        *,
        heartbeat_s: float = 10.0,
        audit_flush_s: float = 0.2,
        limits: LimitStore | None = None,
        metrics: RunMetrics | None = None,
        max_runs: int = 1000,
        resume: bool = True,
        max_resumes: int = 3,
        approval_timeout_s: float = 86_400.0,
    ) -> None:
        self._log = log
        # Tenants' windows (submissions, calls, tokens, cost), shared by every instance when
        # the store is.
        self.limits: LimitStore = limits or InProcessLimitStore()
        self.metrics = metrics or RunMetrics()
        self._writer = RunWriter(log, self.metrics, audit_flush_s=audit_flush_s)
        # Conversations' histories, kept from turn to turn.
        self.histories = ConversationHistories()
        # Tenant windows already filled from the calls recorded before this process held them.
        self._remembered: set[str] = set()
        self._runtime: AgentRuntime | None = None
        self._loader: RunLoader | None = None
        self._tool_sensitive_fields: frozenset[str] = frozenset()
        self._audit_levels: dict[str, str] = {}
        self._runs: dict[UUID, LiveRun] = {}
        # Claimed tasks whose runs are being started.
        self._starting: set[UUID] = set()
        # What tasks accepted here are started from, should this instance claim them.
        self._accepted: dict[UUID, RunStart] = {}
        # Cancels asked of tasks being started here.
        self._cancels: set[UUID] = set()
        self._waiters = TaskWaiters()
        self.max_runs = max_runs
        self._resume = resume
        self._max_resumes = max_resumes
        self._approval_timeout_s = approval_timeout_s
        # Set when calls began to wait for a human anywhere: their timeouts are re-read.
        self._approvals_asked = asyncio.Event()
        self._expirer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._claimer: asyncio.Task[None] | None = None
        self._draining = False
        self._background: set[asyncio.Task[Any]] = set()
        self.metrics.count_active_runs(lambda: len(self._runs))
        self._heartbeat_s = heartbeat_s
        self._heartbeat: asyncio.Task[None] | None = None
        self.lease = RunnerLease(
            id=f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}",
            hostname=socket.gethostname(),
            pid=os.getpid(),
            started_at=utc_now(),
        )
        notices = log.notices
        notices.listen(QUEUE, lambda _: self._wake.set())
        notices.listen(EVENTS, self._waiters.stored)
        notices.listen(CANCEL, self._cancel_requested)
        notices.listen(APPROVALS, lambda _: self._approvals_asked.set())
        notices.on_reconnect.append(self._missed_notices)

    @property
    def runner_id(self) -> str:
        return self.lease.id

    @property
    def lease_s(self) -> float:
        """A runner silent for this long is presumed dead and its runs are resumed elsewhere."""
        return 3 * self._heartbeat_s

    async def start(self) -> None:
        """Registers this process as a runner, takes back the runs of runners that are gone,
        starts claiming from the queue, and keeps the lease renewed (each renewal also gives
        back to the queue the runs of runners whose lease lapsed)."""
        await self._log.notices.start()
        await self._log.register_runner(self.lease)
        await self.recover()
        self._claimer = asyncio.create_task(self._claim_loop(), name="run-claimer")
        self._heartbeat = asyncio.create_task(self._keep_lease(), name="runner-lease")
        self._expirer = asyncio.create_task(self._expire_approvals(), name="approval-timeouts")
        self._wake.set()

    def attach(self, runtime: AgentRuntime) -> None:
        """The runtime is built with this manager as its cost recorder, then attached."""
        self._runtime = runtime
        definitions = runtime.registry.list_tools()
        self._tool_sensitive_fields = frozenset(
            name for definition in definitions for name in definition.visibility.sensitive_fields
        )
        self._audit_levels = {d.name: d.permissions.audit_level for d in definitions}

    def use_loader(self, loader: RunLoader) -> None:
        """What rebuilds the start of a task accepted elsewhere (or before a restart)."""
        self._loader = loader

    @property
    def runtime(self) -> AgentRuntime:
        if self._runtime is None:
            raise RuntimeError("no agent runtime attached")
        return self._runtime

    @property
    def tool_sensitive_fields(self) -> frozenset[str]:
        """Every registered tool's sensitive field names: redacted for restricted readers."""
        return self._tool_sensitive_fields

    @property
    def active_runs(self) -> int:
        return len(self._runs)

    @property
    def waiters(self) -> TaskWaiters:
        return self._waiters

    def channel(self, task_id: UUID) -> RunChannel | None:
        live = self._runs.get(task_id)
        return None if live is None else live.channel

    async def left(self, task_id: UUID) -> None:
        """Returns once no run of the task is live here (ended, handed over, or suspended
        for approvals, its events stored)."""
        with self._waiters.watch(task_id) as changed:
            while task_id in self._runs:
                await changed.wait()
                changed.clear()

    async def record_cost(self, record: CostRecord) -> None:
        live = self._runs.get(UUID(record.task_id))
        if live is not None:
            live.costs.append(record)

    def validate(
        self,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent = BUILTIN_AGENT,
    ) -> None:
        """Refuses a task naming a model or tools this service does not have or its tenant
        did not enable, or more than its agent allows (`InvalidSubmission`), or tools its
        caller may not use (`ToolsNotPermitted`)."""
        runtime = self.runtime
        problems: list[FieldError] = []
        refused: list[FieldError] = []
        spec = agent.definition
        if spec.kind not in runtime.kinds:
            known = ", ".join(runtime.kinds.names())
            problems.append(
                FieldError(
                    "agent",
                    f"agent {agent.ref} is of kind {spec.kind!r}, which this "
                    f"service does not have (available: {known})",
                )
            )
        if (
            submission.model is not None
            and spec.model is not None
            and (submission.model != spec.model)
        ):
            problems.append(
                FieldError(
                    "model",
                    f"agent {agent.ref} runs on {spec.model!r}; a task may "
                    "not choose another model",
                )
            )
        model = self.model_of(submission, policy, agent)
        if not runtime.gateway.has_model(model):
            known = ", ".join(runtime.gateway.model_names())
            problems.append(FieldError("model", f"unknown model {model!r}; available: {known}"))
        elif not policy.models.approves(model) and not problems:
            raise ModelNotApproved(model, policy.models.approved_of(runtime.gateway.model_names()))
        enabled = policy.enabled_tools
        registry = policy.tools.registry if policy.tools is not None else runtime.registry
        for index, name in enumerate(submission.tools or []):
            field = f"tools.{index}"
            if name == LLM_TOOL_NAME or name not in registry:
                problems.append(FieldError(field, f"unknown tool {name!r}"))
            elif enabled is not None and name not in enabled:
                problems.append(FieldError(field, f"{name!r} is not enabled for this tenant"))
            elif spec.tools is not None and name not in spec.tools:
                problems.append(FieldError(field, f"agent {agent.ref} does not have {name!r}"))
            elif not policy.executes_tools:
                refused.append(FieldError(field, "the caller's roles do not grant `tool:execute`"))
            elif not permits(definition := registry.definition(name), policy.roles):
                roles = ", ".join(definition.permissions.required_roles)
                refused.append(FieldError(field, f"{name!r} requires one of the roles: {roles}"))
        for name in spec.tools or []:
            if name not in registry or (enabled is not None and name not in enabled):
                problems.append(
                    FieldError(
                        "agent", f"agent {agent.ref}'s tool {name!r} is not enabled for this tenant"
                    )
                )
        problems.extend(_wider_budget(submission, agent))
        if problems:
            raise InvalidSubmission(problems)
        if refused:
            raise ToolsNotPermitted(refused)

    def model_of(
        self, submission: TaskSubmission, policy: RunPolicy, agent: ResolvedAgent = BUILTIN_AGENT
    ) -> str:
        """The model a task runs on: its own, else its agent's, else its tenant's default,
        else the service's."""
        return (
            submission.model
            or agent.definition.model
            or policy.models.default_model
            or self.runtime.settings.default_model
        )

    async def _remember(self, tenant_id: str, policy: RunPolicy) -> None:
        """Before this process first enforces a tenant's window: what the tenant's calls
        recorded within it used (so a restart does not forget the day's spend)."""
        try:
            await remember(
                self.limits,
                tenant_id,
                policy.quotas,
                functools.partial(self._log.recent_calls, tenant_id),
                self._remembered,
            )
        except Exception:  # the windows then start from this process's calls; tried again
            logger.warning("reading tenant %s's recent calls failed", tenant_id, exc_info=True)

    def _guards(self, chain: ReasoningChain, tenant_id: str, policy: RunPolicy) -> list[ToolGuard]:
        """The run's own guards: its budget, its tenant's model policy and quotas (only
        those that limit anything)."""
        guards: list[ToolGuard] = []
        if chain.budget is not None:
            guards.append(BudgetGuard(chain))
        if policy.models.approved is not None:
            gateway = self.runtime.gateway
            guards.append(
                ModelPolicyGuard(
                    policy.models,
                    default_model=gateway.default_model,
                    available=gateway.model_names(),
                )
            )
        if policy.quotas.limits_runs:
            guards.append(QuotaGuard(self.limits, tenant_id, policy.quotas))
        key_quotas = policy.key_quotas
        if key_quotas is not None and policy.key_scope is not None and key_quotas.limits_runs:
            guards.append(QuotaGuard(self.limits, policy.key_scope, key_quotas))
        return guards

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
    ) -> SubmittedTask:
        """Stores the task and its chain in the queue, for any instance with room to run
        `agent` on it; returns once both rows exist. `attachments` are the files given to it
        (its own and its conversation's, checked to be its tenant's). Refuses (`RateLimited`)
        a task over its tenant's submission rate or concurrent runs, and
        (`ConversationBusy`) a turn while another turn of its conversation runs."""
        self.validate(submission, policy, agent)
        quotas = policy.quotas
        try:
            grant = await admit_submission(self.limits, principal.tenant_id, quotas)
        except RateLimited as exc:
            self.metrics.submission_refused(principal.tenant_id, exc.refusal.limit)
            raise
        key_grant = None
        if policy.key_quotas is not None and policy.key_scope is not None:
            try:
                key_grant = await admit_submission(self.limits, policy.key_scope, policy.key_quotas)
            except RateLimited as exc:
                self.metrics.submission_refused(principal.tenant_id, exc.refusal.limit)
                if grant is not None:
                    await self.limits.release(grant)
                raise
        task_id, now = uuid4(), utc_now()
        model = self.model_of(submission, policy, agent)
        spec = agent.definition
        budget = (submission.budget or Budget()).over(spec.budget)
        if policy.key_quotas is not None:
            budget = budget.over(policy.key_quotas.default_budget)
        budget = budget.over(quotas.default_budget)
        chain = ReasoningChain(
            task_id=str(task_id),
            agent_id=agent.ref,
            tenant_id=principal.tenant_id,
            started_at=now,
            budget=None if budget.is_empty else budget,
        )
        if quotas.limits_runs:
            await self._remember(principal.tenant_id, policy)
        # Should this instance claim it, it starts from this rather than from the store.
        self._accepted[task_id] = RunStart(
            principal,
            submission,
            policy,
            agent,
            [] if turn is None else turn.history,
            attachments,
        )
        # With room here it is claimed as it is stored, and started at once; otherwise it
        # waits in the queue for room here or on another instance.
        direct = not self._draining and self._room() > 0
        if direct:
            self._starting.add(task_id)
        try:
            task = await self._create(
                principal,
                submission,
                policy,
                task_id,
                chain,
                model,
                now,
                agent,
                turn,
                attachments,
                owner=self.runner_id if direct else None,
            )
        except BaseException:
            self._accepted.pop(task_id, None)
            self._starting.discard(task_id)
            for admitted in (grant, key_grant):  # a task that was not accepted does not count
                if admitted is not None:
                    await self.limits.release(admitted)
            raise
        if direct:
            await self._launch(task)
        else:
            self._wake.set()
        return SubmittedTask(task_id, chain.id, TaskState.SUBMITTED)

    def _room(self) -> int:
        return self.max_runs - len(self._runs) - len(self._starting)

    async def _create(
        self,
        principal: Principal,
        submission: TaskSubmission,
        policy: RunPolicy,
        task_id: UUID,
        chain: ReasoningChain,
        model: str,
        now: datetime,
        agent: ResolvedAgent,
        turn: Turn | None,
        attachments: Sequence[Attachment],
        *,
        owner: str | None,
    ) -> TaskRecord:
        """Stores the task and its chain, in the queue or claimed by `owner`; refuses it over
        its tenant's concurrent runs, or while its conversation has a turn running."""
        task = {
            "id": task_id,
            "tenant_id": principal.tenant_id,
            "user_id": principal.subject,
            "status": TaskState.SUBMITTED,
            "chain_id": chain.id,
            "request": submission.model_dump(mode="json", exclude_none=True),
            "model": model,
            "budget": None if chain.budget is None else chain.budget.model_dump(mode="json"),
            "last_seq": 0,
            "runner_id": owner,
            "agent_name": agent.name,
            "agent_version": agent.version,
            "conversation_id": None if turn is None else turn.conversation_id,
            "file_ids": [str(a.file_id) for a in attachments] or None,
            "roles": sorted(principal.roles),
            "api_key_id": None if principal.api_key is None else UUID(principal.api_key),
            "created_at": now,
        }
        chain_row = {
            "id": chain.id,
            "task_id": task_id,
            "tenant_id": principal.tenant_id,
            "agent_id": chain.agent_id,
            "status": ChainStatus.INITIALIZING,
            "metrics": RawJSON(dump_model(chain.metrics)),
            "started_at": now,
        }
        try:
            await self._log.create(
                task,
                chain_row,
                max_unfinished=policy.quotas.concurrent_runs,
                after_turns=None if turn is None else turn.turns,
            )
        except TooManyUnfinished as exc:
            self.metrics.submission_refused(principal.tenant_id, "concurrent_runs")
            raise RateLimited(
                QuotaRefusal("concurrent_runs", exc.limit, None, None),
                f"tenant limit concurrent_runs ({exc.limit}) reached: {exc.unfinished} tasks "
                "are unfinished; submit again when one has finished",
            ) from exc
        return TaskRecord.model_validate(
            {
                **task,
                "usage": chain.metrics,
                "final_answer": None,
                "error_code": None,
                "error_message": None,
                "started_at": None,
                "finished_at": None,
            }
        )

    # --- the queue -----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        """Claims tasks while this instance has room, each time something may have changed:
        a task was queued (here or elsewhere), a run here ended, notices were missed."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._draining:
                return
            room = self._room()
            if room <= 0:
                continue
            try:
                claimed = await self._log.claim(self.runner_id, room)
            except Exception:
                logger.warning("claiming queued tasks failed; trying again", exc_info=True)
                await asyncio.sleep(1.0)
                self._wake.set()
                continue
            # Submissions here may have taken some of the room while the claim was under way:
            # what no longer fits goes back to the queue at once.
            fits = max(self._room(), 0)
            claimed, extra = claimed[:fits], claimed[fits:]
            for task in claimed:
                self._starting.add(task.id)
                self._spawn(self._launch(task), f"launch-{task.id}")
            if extra:
                back = [task.id for task in extra]
                self._starting.update(back)  # this instance's until they are back in the queue
                self._spawn(self._give_back(back), "give-back")
            if len(claimed) == room:
                self._wake.set()  # there may be more

    async def _give_back(self, task_ids: list[UUID]) -> None:
        try:
            await self._log.release(task_ids, self.runner_id, resumed=False)
        except Exception:  # the lease check gives them back
            logger.warning("giving claimed tasks back to the queue failed", exc_info=True)
        finally:
            self._starting.difference_update(task_ids)

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _launch(self, task: TaskRecord) -> None:
        """Starts a claimed task's run: new, or resumed from its stored steps. A task whose
        cancel was asked, or whose run cannot be resumed, is ended instead."""
        accepted = self._accepted.pop(task.id, None)
        try:
            resumed = not task.is_queued
            if task.cancel_reason is not None or task.id in self._cancels:
                reason = task.cancel_reason or "cancelled"
                await self._end_unstarted(task, TaskState.CANCELLED, ErrorCode.CANCELLED, reason)
                return
            if resumed and not self._resume:
                raise Unresumable("resuming runs is turned off (OMNIFORGE_RESUME=false)")
            if resumed and task.resumes >= self._max_resumes:
                raise Unresumable(
                    f"it was resumed {task.resumes} times and its instance stopped each time"
                )
            start = accepted
            if start is None:
                if self._loader is None:
                    raise Unresumable("this instance cannot rebuild runs")
                start = await self._loader(task)
            steps = await self._stored_steps(task) if resumed else []
            await self._start_run(task, start, steps, resumed=resumed)
        except Unresumable as exc:
            await self._end_unstarted(
                task,
                TaskState.FAILED,
                ErrorCode.INTERRUPTED,
                f"the run could not go on after its instance stopped: {exc}",
            )
        except Exception as exc:
            logger.exception("starting task %s failed", task.id)
            await self._end_unstarted(
                task,
                TaskState.FAILED,
                ErrorCode.INTERNAL_ERROR,
                f"its run could not be started ({type(exc).__name__})",
            )
        finally:
            self._starting.discard(task.id)
            self._cancels.discard(task.id)

    async def _stored_steps(self, task: TaskRecord) -> list[ReasoningStep]:
        return [
            ReasoningStep.model_validate_json(step)
            for step in await self._log.chain_steps(task.chain_id)
        ]

    async def _start_run(
        self, task: TaskRecord, start: RunStart, steps: list[ReasoningStep], *, resumed: bool
    ) -> None:
        runtime = self.runtime
        principal, submission, policy, agent = (
            start.principal,
            start.submission,
            start.policy,
            start.agent,
        )
        tools = policy.tools
        services = (
            None
            if tools is None
            else await tools.services(task.id, [str(a.file_id) for a in start.attachments])
        )
        decisions = await self._log.decisions(task.id) if resumed else []
        gate = self._gate(task, agent, policy, decisions)
        chain = ReasoningChain(
            id=task.chain_id,
            task_id=str(task.id),
            agent_id=agent.ref,
            tenant_id=task.tenant_id,
            started_at=task.started_at or task.created_at,
            budget=task.budget,
        )
        if resumed:
            chain.replay(steps)
        agent_task = AgentTask(
            id=str(task.id),
            input=submission.input,
            messages=None
            if submission.messages is None
            else [m.model_dump(exclude_none=True) for m in submission.messages],
            tenant_id=task.tenant_id,
            user_id=task.user_id,
            model=task.model,
            tools=_tools_of(submission, policy, agent) if policy.executes_tools else [],
            roles=policy.roles,
            metadata=submission.metadata,
            history=start.history,
            attachments=[a.description for a in start.attachments],
        )
        models = policy.models
        restricts_models = models.approved is not None or bool(models.max_output_tokens)
        # From here to the run being live nothing awaits.
        run = runtime.agent_for(agent.definition.spec()).start(
            agent_task,
            chain=chain,
            on_delta=output_to(self._runs, task.id) if submission.stream_output else None,
            guards=self._guards(chain, task.tenant_id, policy),
            models=models if restricts_models else None,
            tools=None if tools is None else tools.registry,
            services=services,
            approvals=gate,
            decided=[decided_event(task, record) for record in decisions],
        )
        self._follow(principal, policy, run, task, chain)
        if task.id in self._cancels:
            run.cancel("cancelled")

    def _gate(
        self,
        task: TaskRecord,
        agent: ResolvedAgent,
        policy: RunPolicy,
        decisions: Sequence[ApprovalRecord],
    ) -> ApprovalGate:
        """Which of the run's calls wait for a human (the tenant's and the agent's rules, and
        each tool's own), and what was decided for those of its last suspension."""
        own = agent.definition.approvals
        rules = [r for r in (own, policy.approvals) if r is not None]
        submitter_decides = own is not None and own.submitter_decides
        timeout_s = timeout_of(rules, self._approval_timeout_s)

        async def ask(pending: Sequence[PendingApproval], held: Sequence[UUID]) -> None:
            now = utc_now()
            rows = [
                approval_row(task, call, held, submitter_decides=submitter_decides, at=now)
                for call in pending
            ]
            await self._log.ask(rows)

        async def consume(approval_ids: Sequence[UUID]) -> None:
            await self._log.consume(approval_ids, utc_now())

        return ApprovalGate(
            rules=rules,
            decisions={record.step_id: decision_of(record) for record in decisions},
            held=frozenset(UUID(h) for record in decisions for h in record.held_step_ids),
            ask=ask,
            consume=consume,
            timeout_s=timeout_s,
        )

    async def _expire_approvals(self) -> None:
        """Denies the calls nobody decided on in time: sleeps until the next one's timeout,
        or until calls began to wait anywhere (a notice); any instance may deny a call, once."""
        while True:
            self._approvals_asked.clear()
            try:
                next_at = await self._log.next_expiry()
                wait_s = None if next_at is None else (next_at - utc_now()).total_seconds()
                if wait_s is None or wait_s > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait_s):
                            await self._approvals_asked.wait()
                    continue
                for tenant_id, task_id, approval_id, timeout_s in await self._log.due(utc_now()):
                    await self._expire(tenant_id, task_id, approval_id, timeout_s)
            except Exception:
                logger.warning("denying timed-out approvals failed; retrying", exc_info=True)
                await asyncio.sleep(self._heartbeat_s)

    async def _expire(
        self, tenant_id: str, task_id: UUID, approval_id: UUID, timeout_s: int
    ) -> None:
        now = utc_now()
        audit = audit_row(
            actor="system",
            action=AuditAction.APPROVAL_EXPIRE,
            resource_type="approval",
            resource_id=str(approval_id),
            details={"task_id": str(task_id), "timeout_s": timeout_s},
            at=now,
        )
        await self._log.decide(
            tenant_id,
            task_id,
            approval_id,
            status=ApprovalStatus.EXPIRED,
            by=None,
            reason=f"no decision within {timeout_s} s",
            arguments=None,
            at=now,
            audit={**audit, "tenant_id": tenant_id},
        )

    def _follow(
        self,
        principal: Principal,
        policy: RunPolicy,
        run: AgentRun,
        task: TaskRecord,
        chain: ReasoningChain,
    ) -> None:
        """Records the started run's events as they come."""
        auditor = ToolAuditor(
            task_id=task.id,
            chain_id=chain.id,
            actor=principal.subject,
            redactor=ReaderView(
                VisibilityPolicy(),
                roles=frozenset(),
                full_access=False,
                sensitive_fields=policy.sensitive_fields | self._tool_sensitive_fields,
            ),
            audit_levels=self._audit_levels,
        )
        recorder = RunRecorder(task.id, task.tenant_id, chain, auditor, last_seq=task.last_seq)
        labels = RunLabels(task.tenant_id, run.task.model or "")
        channel = RunChannel(first_seq=task.last_seq + 1)
        live = LiveRun(task.id, run, recorder, labels, channel=channel)
        self._runs[task.id] = live
        live.reader = asyncio.create_task(self._record(live), name=f"record-{task.id}")

    async def _end_unstarted(
        self, task: TaskRecord, status: TaskState, error_code: ErrorCode, message: str
    ) -> bool:
        """Ends a task this instance owns without running it, with the closing events its
        stream never got."""
        try:
            return await self.end_unattended(
                task, status=status, error_code=error_code, message=message
            )
        except Exception:
            logger.exception("ending task %s failed; it goes back to the queue", task.id)
            with contextlib.suppress(Exception):
                await self._log.release([task.id], self.runner_id, resumed=False)
            return False

    # --- cancel ----------------------------------------------------------------------------

    async def cancel(self, task: TaskRecord, reason: str) -> bool | None:
        """Stops the task's run and returns once its end is stored: True when it ended
        `cancelled`, False when it reached another end first (the cancel lost the race), None
        when its owner has not ended it within `lease_s` (the cancel stays asked: whoever
        runs it next ends it). A queued task is ended without ever starting; a run another
        instance owns is stopped by that instance, which a notice tells."""
        live = self._runs.get(task.id)
        if live is not None:
            live.run.cancel(reason)
            await live.stored.wait()
            if live.run.released:  # released as the cancel came: cancel it in the queue
                return await self.cancel(task, reason)
            return live.recorder.final_state is TaskState.CANCELLED
        queued = await self._log.claim_task(task.id, self.runner_id)
        if queued is not None:
            self._accepted.pop(task.id, None)
            return await self._end_unstarted(
                queued, TaskState.CANCELLED, ErrorCode.CANCELLED, reason
            )
        with self._waiters.watch(task.id) as stored:
            asked = await self._log.request_cancel(task.id, reason)
            if asked is None:
                return False
            try:
                async with asyncio.timeout(self.lease_s):
                    while True:
                        stored.clear()
                        current = await self._log.task(task.id)
                        if current is None:
                            return False
                        if current.is_finished:
                            return current.status is TaskState.CANCELLED
                        if current.runner_id is None:  # back in the queue meanwhile
                            claimed = await self._log.claim_task(task.id, self.runner_id)
                            if claimed is not None:
                                return await self._end_unstarted(
                                    claimed, TaskState.CANCELLED, ErrorCode.CANCELLED, reason
                                )
                        await stored.wait()
            except TimeoutError:
                return None

    def _cancel_requested(self, payload: str) -> None:
        """A `CANCEL` notice: a run of this instance is stopped with the reason stored."""
        try:
            task_id = UUID(payload)
        except ValueError:
            return
        if task_id in self._starting:
            self._cancels.add(task_id)
        if task_id in self._runs:
            self._spawn(self._cancel_if_asked(task_id), f"cancel-{task_id}")

    def _missed_notices(self) -> None:
        """Notices may have been lost while the connection was down: everyone looks again."""
        self._wake.set()
        self._waiters.wake_all()
        for live in list(self._runs.values()):
            self._spawn(self._cancel_if_asked(live.task_id), f"recheck-{live.task_id}")

    async def _cancel_if_asked(self, task_id: UUID) -> None:
        """Stops a run of this instance whose cancel is asked in the store."""
        task = await self._log.task(task_id)
        live = self._runs.get(task_id)
        if task is not None and task.cancel_reason is not None and live is not None:
            live.run.cancel(task.cancel_reason)

    def run(self, task_id: UUID) -> AgentRun | None:
        """The task's run, if it is live in this process."""
        live = self._runs.get(task_id)
        return None if live is None else live.run

    # --- leases, recovery, shutdown --------------------------------------------------------

    async def recover(self) -> int:
        """Gives back to the queue the runs of runners that are gone (and runs of this one
        that are not live in it: their end could not be stored), to be resumed by whoever
        claims them. Returns how many."""
        released = await self._log.release_orphans(self.lease, lease_s=self.lease_s, now=utc_now())
        owned = await self._log.owned(self.runner_id)
        # Told apart now, after the read: a task claimed while it ran is live or starting.
        lost = [task_id for task_id in owned if task_id not in self._runs]
        lost = [task_id for task_id in lost if task_id not in self._starting]
        if lost:
            released += await self._log.release(lost, self.runner_id)
        if released:
            logger.warning("%d runs of stopped instances are back in the queue", released)
        return released

    async def shutdown(self, grace_s: float) -> None:
        """Ends every run of this process (`interrupted`) and waits up to `grace_s` for their
        ends to be stored: for tests that must leave nothing running, not for a deploy (that
        is `stop`, which hands runs over)."""
        lives = list(self._runs.values())
        for live in lives:
            live.run.cancel("the server shut down", ErrorCode.INTERRUPTED)
        await _wait_stored(lives, grace_s)

    async def stop(self, grace_s: float) -> None:
        """Drains: claims nothing more, lets each run reach a step boundary within `grace_s`
        (a call that must not be made twice finishes; others are left to be made again),
        gives their tasks back to the queue for another instance to resume at once, then
        gives up the lease."""
        self._draining = True
        self._wake.set()
        for task in (self._claimer, self._heartbeat, self._expirer):
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
        lives = list(self._runs.values())
        for live in lives:
            live.run.release()
        pending = await _wait_stored(lives, grace_s)
        for live in pending:
            live.run.release(now=True)
        await _wait_stored(pending, max(grace_s, 1.0))
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(list(self._background), timeout=1.0)
        await self._writer.close()
        try:
            await self._log.remove_runner(self.runner_id)
        except Exception:  # the lease lapses on its own
            logger.warning("could not remove runner %s", self.runner_id, exc_info=True)
        await self._log.notices.aclose()

    async def _keep_lease(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self._log.renew_lease(self.runner_id, utc_now())
                await self.recover()
            except Exception:
                logger.warning("renewing the runner lease failed; retrying", exc_info=True)

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
                    self.metrics.observe(live.labels, batch)
                    last = isinstance(batch[-1], DoneEvent)
                    self._writer.queue_batch(live, write, events, last=last)
            if live.run.released and not live.broken:
                await self._hand_over(live)
        except Exception as exc:
            logger.exception("recording task %s failed; its run is ended", live.task_id)
            self._writer.queue_end(live, f"its events could not be recorded ({type(exc).__name__})")
        try:
            await live.stored.wait()
        finally:
            self._runs.pop(live.task_id, None)
            self._waiters.wake(live.task_id)
            if not self._draining:
                self._wake.set()

    async def _hand_over(self, live: LiveRun) -> None:
        """A released run: once everything it queued is stored, its task goes back to the
        queue (a resume by whoever claims it) and its followers read on from the store. A
        run suspended for approvals leaves its task waiting, owned by nobody, until they are
        decided."""
        try:
            await self._writer.record_audit([])  # behind everything queued before it
            if live.run.suspended:
                await self._log.suspend(live.task_id, self.runner_id)
            else:
                await self._log.release([live.task_id], self.runner_id)
        except Exception:  # the lease check gives it back once this instance is gone
            logger.warning("handing task %s back to the queue failed", live.task_id, exc_info=True)
        live.channel.close()
        live.stored.set()

    async def end_unattended(
        self,
        task: TaskRecord,
        *,
        status: TaskState,
        error_code: ErrorCode,
        message: str,
    ) -> bool:
        """Ends a run this instance owns but does not run, with the closing events its
        stream never got; False when it was no longer unfinished or no longer this
        instance's."""
        now = utc_now()
        closing = closing_events(
            task.id,
            task.chain_id,
            status=status,
            error_code=error_code,
            message=message,
            metrics=task.usage,
            at=now,
        )
        rows = [
            event_row(
                task.id, task.tenant_id, task.last_seq + offset, event.type, dump_model(event)
            )
            for offset, event in enumerate(closing, start=1)
        ]
        return await self._log.end_owned(
            task,
            rows,
            status=status,
            error_code=error_code,
            message=message,
            at=now,
            me=self.runner_id,
        )


async def _wait_stored(lives: Sequence[LiveRun], timeout_s: float) -> list[LiveRun]:
    """Waits up to `timeout_s` for the runs' ends (or hand-overs) to be stored; returns those
    still going."""
    if not lives:
        return []
    waits = {asyncio.ensure_future(live.stored.wait()): live for live in lives}
    _, pending = await asyncio.wait(waits, timeout=timeout_s)
    for wait in pending:
        wait.cancel()
    return [waits[wait] for wait in pending]


def _tools_of(
    submission: TaskSubmission, policy: RunPolicy, agent: ResolvedAgent
) -> list[str] | None:
    """The tools a run may use: the task's, else its agent's, else its tenant's enabled ones
    (None: every tool)."""
    if submission.tools is not None:
        return submission.tools
    if agent.definition.tools is not None:
        return agent.definition.tools
    return None if policy.enabled_tools is None else sorted(policy.enabled_tools)


def _wider_budget(submission: TaskSubmission, agent: ResolvedAgent) -> list[FieldError]:
    """A task's budget limits above its agent's: a task may only narrow them."""
    task, bound = submission.budget, agent.definition.budget
    if task is None or bound is None:
        return []
    problems = []
    for name in BudgetLimit:
        asked, allowed = getattr(task, name), getattr(bound, name)
        if asked is not None and allowed is not None and asked > allowed:
            problems.append(
                FieldError(f"budget.{name}", f"{asked} is above agent {agent.ref}'s {allowed}")
            )
    return problems
