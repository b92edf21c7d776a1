"""RunManager: starts each task as an asyncio task of this process, records its events as they
happen (the writer stores, then publishes them), and owns cancellation and recovery."""

import asyncio
import contextlib
import functools
import logging
import os
import socket
from collections.abc import Sequence
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
    TaskState,
)
from app.chain.models import utc_now
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
from app.runs.audit import ToolAuditor
from app.runs.channel import RunChannel
from app.runs.conversations import ConversationHistories
from app.runs.errors import (
    InvalidSubmission,
    ModelNotApproved,
    TaskRunsElsewhere,
    ToolsNotPermitted,
)
from app.runs.live import LiveRun, output_to
from app.runs.metrics import RunLabels, RunMetrics
from app.runs.models import Attachment, RunPolicy, TaskSubmission
from app.runs.recorder import RunRecorder, closing_events, event_row
from app.runs.writer import RunWriter
from app.security import Principal
from app.security.visibility import ReaderView, VisibilityPolicy
from app.storage.records import TaskRecord
from app.storage.run_log import RunLog, RunnerLease, TooManyUnfinished
from app.storage.text import dump_model
from app.storage.types import RawJSON
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


class RunManager:
    """The runs of this process. Also the runtime's `CostRecorder`: a run's cost records are
    written in the same transaction as the steps that follow them."""

    def __init__(
        self,
        log: RunLog,
        *,
        heartbeat_s: float = 10.0,
        audit_flush_s: float = 0.2,
        limits: LimitStore | None = None,
        metrics: RunMetrics | None = None,
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
        self._tool_sensitive_fields: frozenset[str] = frozenset()
        self._audit_levels: dict[str, str] = {}
        self._runs: dict[UUID, LiveRun] = {}
        # Tasks stored but not yet live (between their rows and their run): not orphans.
        self._admitting: set[UUID] = set()
        self.metrics.count_active_runs(lambda: len(self._runs))
        self._heartbeat_s = heartbeat_s
        self._heartbeat: asyncio.Task[None] | None = None
        self.lease = RunnerLease(
            id=f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}",
            hostname=socket.gethostname(),
            pid=os.getpid(),
            started_at=utc_now(),
        )

    @property
    def runner_id(self) -> str:
        return self.lease.id

    @property
    def lease_s(self) -> float:
        """A runner silent for this long is presumed dead and its runs are ended."""
        return 3 * self._heartbeat_s

    async def start(self) -> None:
        """Registers this process as a runner, ends runs whose runner is gone, and keeps the
        lease renewed (each renewal also ends runs of runners whose lease lapsed)."""
        await self._log.register_runner(self.lease)
        await self.recover()
        self._heartbeat = asyncio.create_task(self._keep_lease(), name="runner-lease")

    def attach(self, runtime: AgentRuntime) -> None:
        """The runtime is built with this manager as its cost recorder, then attached."""
        self._runtime = runtime
        definitions = runtime.registry.list_tools()
        self._tool_sensitive_fields = frozenset(
            name for definition in definitions for name in definition.visibility.sensitive_fields
        )
        self._audit_levels = {d.name: d.permissions.audit_level for d in definitions}

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

    def channel(self, task_id: UUID) -> RunChannel | None:
        live = self._runs.get(task_id)
        return None if live is None else live.channel

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

    async def submit(
        self,
        principal: Principal,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent = BUILTIN_AGENT,
        turn: Turn | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> SubmittedTask:
        """Stores the task and its chain, then starts `agent` on it; returns once both rows
        exist. `attachments` are the files given to it (its own and its conversation's,
        checked to be its tenant's). Refuses (`RateLimited`) a task over its tenant's
        submission rate or concurrent runs, and (`ConversationBusy`) a turn while another turn
        of its conversation runs."""
        self.validate(submission, policy, agent)
        runtime = self.runtime
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
        tools = policy.tools
        services = (
            None
            if tools is None
            else await tools.services(task_id, [str(a.file_id) for a in attachments])
        )
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
        self._admitting.add(task_id)
        try:
            await self._create(
                principal, submission, policy, task_id, chain, model, now, agent, turn, attachments
            )
        except BaseException:
            self._admitting.discard(task_id)
            for admitted in (grant, key_grant):  # a task that was not accepted does not count
                if admitted is not None:
                    await self.limits.release(admitted)
            raise
        # From here to the run being live nothing awaits: no request can see the task
        # between its rows and its run.
        task = AgentTask(
            id=str(task_id),
            input=submission.input,
            messages=None
            if submission.messages is None
            else [m.model_dump(exclude_none=True) for m in submission.messages],
            tenant_id=principal.tenant_id,
            user_id=principal.subject,
            model=model,
            tools=_tools_of(submission, policy, agent) if policy.executes_tools else [],
            roles=policy.roles,
            metadata=submission.metadata,
            history=[] if turn is None else turn.history,
            attachments=[a.description for a in attachments],
        )
        models = policy.models
        restricts_models = models.approved is not None or bool(models.max_output_tokens)
        run = runtime.agent_for(spec.spec()).start(
            task,
            chain=chain,
            on_delta=output_to(self._runs, task_id) if submission.stream_output else None,
            guards=self._guards(chain, principal.tenant_id, policy),
            models=models if restricts_models else None,
            tools=None if tools is None else tools.registry,
            services=services,
        )
        submitted = self._follow(principal, policy, run, task_id, chain)
        self._admitting.discard(task_id)
        return submitted

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
    ) -> None:
        """Stores the task and its chain; refuses it over its tenant's concurrent runs, or
        while its conversation has a turn running."""
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
            "runner_id": self.runner_id,
            "agent_name": agent.name,
            "agent_version": agent.version,
            "conversation_id": None if turn is None else turn.conversation_id,
            "file_ids": [str(a.file_id) for a in attachments] or None,
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

    def _follow(
        self,
        principal: Principal,
        policy: RunPolicy,
        run: AgentRun,
        task_id: UUID,
        chain: ReasoningChain,
    ) -> SubmittedTask:
        """Records the started run's events as they come."""
        auditor = ToolAuditor(
            task_id=task_id,
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
        recorder = RunRecorder(task_id, principal.tenant_id, chain, auditor)
        labels = RunLabels(principal.tenant_id, run.task.model or "")
        live = LiveRun(task_id, run, recorder, labels)
        self._runs[task_id] = live
        live.reader = asyncio.create_task(self._record(live), name=f"record-{task_id}")
        return SubmittedTask(task_id, chain.id, TaskState.SUBMITTED)

    async def record_audit(self, rows: list[dict[str, Any]]) -> None:
        """Stores audit rows with the next group the writer commits; returns once stored."""
        await self._writer.record_audit(rows)

    def queue_audit(self, rows: list[dict[str, Any]]) -> None:
        """Queues audit rows to be stored with the next group, at most `audit_flush_s` later."""
        self._writer.queue_audit(rows)

    async def cancel(self, task: TaskRecord, reason: str) -> bool:
        """Stops the task's run and returns once its end is stored: True when it ended
        `cancelled`, False when it reached another end first (the cancel lost the race). A
        task no live process runs is ended here. A run another live process owns is not
        touched: `TaskRunsElsewhere`."""
        live = self._runs.get(task.id)
        if live is not None:
            live.run.cancel(reason)
            await live.stored.wait()
            return live.recorder.final_state is TaskState.CANCELLED
        # Until cancellation travels between instances, only a live owner writes its events.
        if await self._owned_elsewhere(task):
            raise TaskRunsElsewhere(task.id, task.runner_id or "")
        return await self.end_unattended(
            task, status=TaskState.CANCELLED, error_code=ErrorCode.CANCELLED, message=reason
        )

    def run(self, task_id: UUID) -> AgentRun | None:
        """The task's run, if it is live in this process."""
        live = self._runs.get(task_id)
        return None if live is None else live.run

    async def _owned_elsewhere(self, task: TaskRecord) -> bool:
        owner = task.runner_id
        if owner is None or owner == self.runner_id:
            return False
        return await self._log.runner_alive(owner, lease_s=self.lease_s, now=utc_now())

    async def recover(self) -> int:
        """Ends runs left unfinished by a process that is gone as `failed`/`interrupted`,
        with the closing events their streams never got; also this process's own tasks that
        are no longer live in it (a run whose end could not be stored). Returns how many."""
        ended = 0
        orphans = await self._log.orphans(self.lease, lease_s=self.lease_s, now=utc_now())
        for task in orphans:
            if task.runner_id == self.runner_id:
                # Told apart now, after the read: a task admitted while it ran is live by now.
                if task.id in self._runs or task.id in self._admitting:
                    continue
                # Its run is gone from this process: its end could not be stored at the time.
                code, message = ErrorCode.INTERNAL_ERROR, "its run ended without its end stored"
            else:
                code = ErrorCode.INTERRUPTED
                message = "the process running this task stopped before it finished"
            ended += await self.end_unattended(
                task, status=TaskState.FAILED, error_code=code, message=message
            )
        if ended:
            logger.warning("ended %d runs that no live process runs any more", ended)
        return ended

    async def shutdown(self, grace_s: float) -> None:
        """Stops every run (`interrupted`) and waits up to `grace_s` for their ends to be
        stored."""
        lives = list(self._runs.values())
        for live in lives:
            live.run.cancel("the server shut down", ErrorCode.INTERRUPTED)
        if lives:
            waits = [asyncio.ensure_future(live.stored.wait()) for live in lives]
            _, pending = await asyncio.wait(waits, timeout=grace_s)
            for wait in pending:
                wait.cancel()

    async def stop(self, grace_s: float) -> None:
        """Ends every run (`interrupted`), then gives up the lease."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.wait([self._heartbeat])
        await self.shutdown(grace_s)
        await self._writer.close()
        try:
            await self._log.remove_runner(self.runner_id)
        except Exception:  # the lease lapses on its own
            logger.warning("could not remove runner %s", self.runner_id, exc_info=True)

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
        (`internal_error`), after what was queued of it."""
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
        except Exception as exc:
            logger.exception("recording task %s failed; its run is ended", live.task_id)
            self._writer.queue_end(live, f"its events could not be recorded ({type(exc).__name__})")
        try:
            await live.stored.wait()
        finally:
            self._runs.pop(live.task_id, None)

    async def end_unattended(
        self,
        task: TaskRecord,
        *,
        status: TaskState,
        error_code: ErrorCode,
        message: str,
    ) -> bool:
        """Ends a run that no process runs, with the closing events its stream never got;
        False when it was no longer unfinished, or a live process owns it after all."""
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
        return await self._log.end_unattended(
            task,
            rows,
            status=status,
            error_code=error_code,
            message=message,
            at=now,
            me=self.runner_id,
            lease_s=self.lease_s,
        )


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
