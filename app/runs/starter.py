"""Starting a claimed task's run: new, or resumed from its stored steps (its agent's state
rebuilt from the chain, stored calls replayed rather than made again). What a run starts from
the instance that accepted it has at hand; any other rebuilds it from the stored task. A task
whose cancel was asked, or whose run cannot go on, is ended instead, with the closing events
its stream never got."""

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.agents import AgentRuntime, AgentTask
from app.chain import ErrorCode, ReasoningChain, ReasoningStep, TaskState
from app.chain.models import utc_now
from app.chain.replay import ReplayMatch
from app.errors import OmniForgeError
from app.governance.budgets import BudgetGuard
from app.governance.limits import LimitStore
from app.governance.models import ModelPolicyGuard
from app.governance.quotas import QuotaGuard
from app.observability.log_context import bind_run
from app.resources.webhooks.subscriptions import RunWebhooks
from app.runs.active import ActiveRuns
from app.runs.agents import ResolvedAgent
from app.runs.approvals import approval_gate, decided_event
from app.runs.models import Attachment, FamilyLink, RunPolicy, TaskSubmission
from app.runs.recorder import closing_events, event_row
from app.runs.recordings import RecordingGone, recording_of
from app.runs.trails import RunTrails, stale_trails
from app.security import Principal
from app.storage.errors import describe, is_transient
from app.storage.records import TaskRecord
from app.storage.runs import RunStores
from app.storage.runs.queue import held_by
from app.storage.text import dump_model
from app.tools.base import BaseTool
from app.tools.guards import ToolGuard
from app.tools.registry import RegisteredTool
from app.tools.subagents import is_sub_agent_ref, tool_name

logger = logging.getLogger(__name__)


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
    # A sub-agent's run: where it sits in its family (None: a family's first task).
    family: FamilyLink | None = None


MAX_FAILURES = 5
"""Attempts at a task that may fail (its run not started, its end not stored) before it is
ended for good, saying so."""


class Unresumable(OmniForgeError):
    """A stored task whose run cannot be started again (its agent version is gone...)."""


RunLoader = Callable[[TaskRecord], Awaitable[RunStart]]
SubAgentTools = Callable[
    ["RunStarter", TaskRecord, ReasoningChain, RunStart], Awaitable[Sequence[BaseTool]]
]
"""The sub-agent tools of a run whose agent lists other agents (`agent:name`)."""


class RunStarter:
    """Starts the runs of tasks claimed by this runner (`me`) and hands each to `active`."""

    def __init__(
        self,
        stores: RunStores,
        limits: LimitStore,
        active: ActiveRuns,
        runtime: AgentRuntime,
        *,
        me: str,
        resume: bool = True,
        max_resumes: int = 3,
        approval_timeout_s: float = 86_400.0,
        sub_agent_tools: SubAgentTools | None = None,
        retry_later: Callable[[float], None] = lambda _: None,
        loader: "RunLoader | None" = None,
    ) -> None:
        self._stores = stores
        # Claims again once a task given back after a failure may be claimed.
        self._retry_later = retry_later
        self._sub_agent_tools = sub_agent_tools
        self._limits = limits
        self._active = active
        self._me = me
        self._resume = resume
        self._max_resumes = max_resumes
        self._approval_timeout_s = approval_timeout_s
        self._runtime = runtime
        # What rebuilds the start of a task accepted elsewhere (or before a restart).
        self._loader = loader
        # What tasks accepted here are started from, should this instance claim them.
        self._accepted: dict[UUID, RunStart] = {}
        # Cancels asked of tasks being started here.
        self._cancels: set[UUID] = set()

    def accept(self, task_id: UUID, start: RunStart) -> None:
        """A task accepted here: should this instance claim it, it starts from `start`
        rather than from the store."""
        self._accepted[task_id] = start

    async def load(self, task: TaskRecord) -> RunStart:
        """What a stored task's run starts from, rebuilt from the store."""
        if self._loader is None:
            raise Unresumable("this instance cannot rebuild runs")
        return await self._loader(task)

    def forget(self, task_id: UUID) -> None:
        """A task accepted here that will not be claimed here (not stored, or ended)."""
        self._accepted.pop(task_id, None)

    def cancel_starting(self, task_id: UUID) -> None:
        """A cancel asked of a task being started: its run is stopped as it starts."""
        self._cancels.add(task_id)

    async def launch(self, task: TaskRecord) -> None:
        """Starts a claimed task's run: new, or resumed from its stored steps. A task whose
        cancel was asked, or whose run cannot be resumed, is ended instead."""
        accepted = self._accepted.pop(task.id, None)
        # The run's own tasks, started from here, log with its ids.
        unbind = bind_run(task.tenant_id, task.id, task.chain_id)
        try:
            resumed = not task.is_queued
            if task.failures >= MAX_FAILURES:
                await self._end_poisoned(task)
                return
            if task.cancel_reason is not None or task.id in self._cancels:
                reason = task.cancel_reason or "cancelled"
                await self.end_unstarted(task, TaskState.CANCELLED, ErrorCode.CANCELLED, reason)
                return
            if resumed and not self._resume:
                raise Unresumable("resuming runs is turned off (OMNIFORGE_RESUME=false)")
            if resumed and task.resumes >= self._max_resumes:
                raise Unresumable(
                    f"it was resumed {task.resumes} times and its instance stopped each time"
                )
            start = accepted if accepted is not None else await self.load(task)
            steps = await self._stored_steps(task) if resumed else []
            try:
                recording = await recording_of(self._stores, task)
            except RecordingGone as exc:
                raise Unresumable(str(exc)) from exc
            await self._start(task, start, steps, resumed=resumed, recording=recording)
        except Unresumable as exc:
            await self.end_unstarted(
                task,
                TaskState.FAILED,
                ErrorCode.INTERRUPTED,
                f"the run could not go on after its instance stopped: {exc}",
            )
        except Exception as exc:
            if is_transient(exc):  # the store's trouble, not the task's: it is not failed
                logger.warning(
                    "starting task %s failed (%s); it goes back to the queue",
                    task.id,
                    describe(exc),
                )
                await self._give_back(task, failed=False)
                return
            logger.exception("starting task %s failed", task.id)
            await self.end_unstarted(
                task,
                TaskState.FAILED,
                ErrorCode.INTERNAL_ERROR,
                f"its run could not be started ({type(exc).__name__})",
            )
        finally:
            self._cancels.discard(task.id)
            unbind()

    async def _stored_steps(self, task: TaskRecord) -> list[ReasoningStep]:
        return [
            ReasoningStep.model_validate_json(step)
            for step in await self._stores.streams.chain_steps(task.chain_id)
        ]

    async def _start(
        self,
        task: TaskRecord,
        start: RunStart,
        steps: list[ReasoningStep],
        *,
        resumed: bool,
        recording: list[ReasoningStep] | None = None,
    ) -> None:
        runtime = self._runtime
        submission, policy, agent = start.submission, start.policy, start.agent
        tools = policy.tools
        registry = None if tools is None else tools.registry
        services = (
            None
            if tools is None
            else await tools.services(
                task.id,
                [str(a.file_id) for a in start.attachments],
                user=task.user_id,
                conversation_id=task.conversation_id,
            )
        )
        decisions = await self._stores.approvals.decisions(task.id) if resumed else []
        gate = approval_gate(
            self._stores.approvals,
            task,
            held_by(task),
            agent,
            policy,
            decisions,
            default_timeout_s=self._approval_timeout_s,
        )
        chain = ReasoningChain(
            id=task.chain_id,
            task_id=str(task.id),
            agent_id=agent.ref,
            tenant_id=task.tenant_id,
            started_at=task.started_at or task.created_at,
            budget=task.budget,
        )
        if recording is not None:
            # A replay or a fork: its own stored steps, then the recording's after them.
            chain.replay(
                [*steps, *recording[len(steps) :]],
                stored=len(steps),
                match=task.replay_match or ReplayMatch.ACTIONS,
                then_live=task.replayed_from is None,
            )
        elif resumed:
            chain.replay(steps)
        if resumed:
            await self._end_trails(task)
        if services is not None:
            trails = RunTrails(
                self._stores.queue,
                self._active,
                runtime.executor,
                task,
                chain,
                me=self._me,
                actor=start.principal.subject,
            )
            services = dataclasses.replace(services, trails=trails)
        if self._sub_agent_tools is not None and policy.executes_tools:
            own = await self._sub_agent_tools(self, task, chain, start)
            if own:
                base = registry if registry is not None else runtime.registry
                registry = base.extended(RegisteredTool.of(tool) for tool in own)
        if start.history:  # what the conversation's earlier turns read is in this run too
            known = registry if registry is not None else runtime.registry
            gate.flow.took_in_history(
                start.history, lambda name: known.definition(name) if name in known else None
            )
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
        if start.family is not None:
            start.family.parent_chain.adopt(chain)
        spec = agent.definition.spec()
        if submission.kind is not None:
            spec = spec.model_copy(update={"kind": submission.kind})
        if spec.kind == "auto" and models.complexity_assessment == "heuristic":
            spec = spec.assessed_by_heuristic()
        run = runtime.agent_for(spec).start(
            agent_task,
            chain=chain,
            on_delta=self._active.output_to(task.id) if submission.stream_output else None,
            guards=self._guards(chain, task.tenant_id, policy, child=start.family is not None),
            models=models if restricts_models else None,
            tools=registry,
            services=services,
            approvals=gate,
            decided=[decided_event(task, record) for record in decisions],
        )
        self._active.follow(
            run,
            task,
            chain,
            actor=start.principal.subject,
            sensitive_fields=policy.sensitive_fields,
            webhooks=RunWebhooks.of(
                task.tenant_id, task.id, chain, policy.webhooks, submission.webhook_url
            ),
            call=None if start.family is None else start.family.call,
        )
        if task.id in self._cancels:
            run.cancel("cancelled")

    def _guards(
        self, chain: ReasoningChain, tenant_id: str, policy: RunPolicy, *, child: bool
    ) -> list[ToolGuard]:
        """The run's own guards: its budget (and, for a sub-agent, its ancestors'), its
        tenant's model policy and quotas (only those that limit anything)."""
        guards: list[ToolGuard] = []
        if chain.budget is not None or child:
            guards.append(BudgetGuard(chain))
        if policy.models.approved is not None:
            gateway = self._runtime.gateway
            guards.append(
                ModelPolicyGuard(
                    policy.models,
                    default_model=gateway.default_model,
                    available=gateway.model_names(),
                )
            )
        if policy.quotas.limits_runs:
            guards.append(QuotaGuard(self._limits, tenant_id, policy.quotas))
        key_quotas = policy.key_quotas
        if key_quotas is not None and policy.key_scope is not None and key_quotas.limits_runs:
            guards.append(QuotaGuard(self._limits, policy.key_scope, key_quotas))
        return guards

    async def end_unstarted(
        self, task: TaskRecord, status: TaskState, error_code: ErrorCode, message: str
    ) -> bool:
        """Ends a task this instance owns without running it, with the closing events its
        stream never got; False when it was no longer unfinished or no longer this
        instance's (or its end could not be stored: then it goes back to the queue)."""
        try:
            ended = await self._end_owned(task, status, error_code, message)
            await self._end_children(task, status, error_code)
            return ended
        except Exception as exc:
            logger.exception("ending task %s failed; it goes back to the queue", task.id)
            await self._give_back(task, failed=not is_transient(exc))
            return False

    async def _give_back(self, task: TaskRecord, *, failed: bool) -> None:
        """A task this instance could not start or end: back to the queue, held back a while
        (longer after each failure it counts), so that no instance takes it again at once."""
        try:
            delay = await self._stores.queue.release_failed(
                self._me, {task.id: task.owner_epoch}, counted=failed
            )
        except Exception:  # the lease check gives it back
            logger.warning("giving task %s back to the queue failed", task.id, exc_info=True)
            return
        if delay is not None:
            self._retry_later(delay)

    async def _end_poisoned(self, task: TaskRecord) -> None:
        """Ends a task that failed `MAX_FAILURES` times, saying so: with its closing events,
        or, should even those not be stored, with a bare `done`."""
        message = (
            f"it failed {task.failures} times: its run could not be started or its end "
            "could not be stored (see the service's log)"
        )
        try:
            await self._end_owned(task, TaskState.FAILED, ErrorCode.INTERNAL_ERROR, message)
            return
        except Exception:
            logger.exception("ending task %s after %d failures failed", task.id, task.failures)
        try:
            await self._stores.writes.end_bare(task, held_by(task), message=message, at=utc_now())
        except Exception:
            logger.exception("task %s cannot be ended at all; it is held back", task.id)
            await self._give_back(task, failed=True)

    async def _end_children(
        self, task: TaskRecord, status: TaskState, error_code: ErrorCode
    ) -> None:
        """Sub-agents' tasks left waiting by a parent that ends without running (its instance
        stopped while they ran): nobody else would start them, so they end with it."""
        queue = self._stores.queue
        for child in await queue.children(task.id):
            if child.is_finished:
                continue
            with self._active.claiming(child.id):
                claimed = await queue.claim_child(child.id, self._me)
                if claimed is None:
                    claimed = await queue.claim_task(child.id, self._me)  # waits for approvals
                if claimed is not None:
                    await self.end_unstarted(
                        claimed, status, error_code, f"its parent task {task.id} ended {status}"
                    )

    async def _end_trails(self, task: TaskRecord) -> None:
        """Remote agents' trails its calls left unfinished when its instance stopped: the
        calls they recorded are not made again, so they end (`interrupted`)."""
        for trail in await stale_trails(self._stores.queue, task.id):
            with self._active.claiming(trail.id):
                claimed = await self._stores.queue.claim_child(trail.id, self._me)
                if claimed is not None:
                    await self.end_unstarted(
                        claimed,
                        TaskState.FAILED,
                        ErrorCode.INTERRUPTED,
                        "the call it recorded was interrupted when its instance stopped",
                    )

    async def _end_owned(
        self, task: TaskRecord, status: TaskState, error_code: ErrorCode, message: str
    ) -> bool:
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
        return await self._stores.writes.end_owned(
            task,
            held_by(task),
            rows,
            status=status,
            error_code=error_code,
            message=message,
            at=now,
        )


def _tools_of(
    submission: TaskSubmission, policy: RunPolicy, agent: ResolvedAgent
) -> list[str] | None:
    """The tools a run may use: the task's, else its agent's, else its tenant's enabled ones
    (None: every tool)."""
    if submission.tools is not None:
        return submission.tools
    if agent.definition.tools is not None:
        return [tool_name(t) if is_sub_agent_ref(t) else t for t in agent.definition.tools]
    return None if policy.enabled_tools is None else sorted(policy.enabled_tools)
