"""Admission: whether a task may be run at all (its model, tools and budget against what the
service has, its tenant enabled and its caller may use), whether its tenant's and key's
windows admit it, and storing it with its chain, in the queue or claimed by this instance."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.agents import AgentRuntime
from app.chain import Budget, BudgetLimit, ChainStatus, ReasoningChain, TaskState
from app.chain.models import utc_now
from app.governance.limits import Grant, LimitStore, LimitStoreUnavailable
from app.governance.quotas import QuotaRefusal, RateLimited, admit_submission
from app.runs.agents import BUILTIN_AGENT, ResolvedAgent
from app.runs.errors import InvalidSubmission, ModelNotApproved, ToolsNotPermitted
from app.runs.metrics import RunMetrics
from app.runs.models import Attachment, ChildColumns, Origin, RunPolicy, TaskSubmission
from app.security import Principal
from app.storage.idempotency import KeyClaim
from app.storage.records import TaskRecord
from app.storage.runs import Fence, TaskQueue, TooManyUnfinished
from app.storage.text import dump_model
from app.storage.types import RawJSON
from app.tools.builtin.llm import LLM_TOOL_NAME
from app.tools.errors import FieldError
from app.tools.permissions import permits
from app.tools.subagents import is_sub_agent_ref

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Turn:
    """A task that continues a conversation: the history its run starts from, rebuilt from
    the `turns` turns stored before it (the conversation must still have exactly that many
    when the task is stored, and none unfinished)."""

    conversation_id: UUID
    turns: int
    history: list[dict[str, Any]]


class Admission:
    """Checks and stores submitted tasks; `limits` are the tenants' windows (submissions,
    calls, tokens, cost), shared by every instance when the store is."""

    def __init__(
        self,
        queue: TaskQueue,
        limits: LimitStore,
        metrics: RunMetrics,
        runtime: AgentRuntime,
    ) -> None:
        self._queue = queue
        self._limits = limits
        self._metrics = metrics
        self._runtime = runtime

    def validate(
        self,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent = BUILTIN_AGENT,
    ) -> None:
        """Refuses a task naming a model or tools this service does not have or its tenant
        did not enable, or more than its agent allows (`InvalidSubmission`), or tools its
        caller may not use (`ToolsNotPermitted`)."""
        runtime = self._runtime
        problems: list[FieldError] = []
        refused: list[FieldError] = []
        spec = agent.definition
        if submission.kind is not None and submission.kind not in runtime.kinds:
            known = ", ".join(runtime.kinds.names())
            problems.append(
                FieldError(
                    "kind",
                    f"{submission.kind!r} is no strategy this service has (available: {known})",
                )
            )
        elif submission.kind is None and spec.kind not in runtime.kinds:
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
            if is_sub_agent_ref(name):
                continue  # another agent of the tenant: resolved as its run starts
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
            or self._runtime.settings.default_model
        )

    async def admit(self, tenant_id: str, policy: RunPolicy) -> list[Grant]:
        """Counts a submission in its tenant's (and its key's) submission window; refuses it
        (`RateLimited`) over either, or when the windows cannot be decided now
        (`LimitStoreUnavailable`: their store and the database both unreachable). Returns what
        to give back should the task not be stored."""
        grants: list[Grant] = []
        scopes = [(tenant_id, policy.quotas)]
        if policy.key_quotas is not None and policy.key_scope is not None:
            scopes.append((policy.key_scope, policy.key_quotas))
        for scope, quotas in scopes:
            try:
                grant = await admit_submission(self._limits, scope, quotas)
            except (RateLimited, LimitStoreUnavailable) as exc:
                if isinstance(exc, RateLimited):
                    self._metrics.submission_refused(tenant_id, exc.refusal.limit)
                await self.give_back(grants)
                raise
            if grant is not None:
                grants.append(grant)
        return grants

    async def give_back(self, grants: Sequence[Grant]) -> None:
        """A task that was not accepted does not count."""
        for grant in grants:
            await self._limits.release(grant)

    async def store(
        self,
        task_id: UUID,
        principal: Principal,
        submission: TaskSubmission,
        policy: RunPolicy,
        agent: ResolvedAgent,
        turn: Turn | None,
        attachments: Sequence[Attachment],
        *,
        owner: str | None,
        idempotency: KeyClaim | None = None,
        schedule_id: UUID | None = None,
        origin: Origin | None = None,
        family: ChildColumns | None = None,
        budget: Budget | None = None,
        parent: tuple[UUID, Fence] | None = None,
    ) -> TaskRecord:
        """Stores the task and its chain, in the queue or claimed by `owner`; refuses it over
        its tenant's concurrent runs, or while its conversation has a turn running. With
        `idempotency` its key is claimed with it (`KeyTaken` when another task has it);
        `schedule_id` tags a schedule's firing. A sub-agent's task (`family`) has exactly the
        `budget` carved for it and does not count against its tenant's concurrent runs (its
        family's first task does), and is stored only while its parent's run holds the
        parent's task (`parent`: the task and the run's fence; `TaskLost` otherwise)."""
        now = utc_now()
        quotas = policy.quotas
        spec = agent.definition
        if family is None:
            budget = (submission.budget or Budget()).over(spec.budget)
            if policy.key_quotas is not None:
                budget = budget.over(policy.key_quotas.default_budget)
            budget = budget.over(quotas.default_budget)
        elif budget is None:
            budget = Budget()
        chain = ReasoningChain(
            task_id=str(task_id),
            agent_id=agent.ref,
            tenant_id=principal.tenant_id,
            started_at=now,
            budget=None if budget.is_empty else budget,
        )
        task = {
            "id": task_id,
            "tenant_id": principal.tenant_id,
            "user_id": principal.subject,
            "status": TaskState.SUBMITTED,
            "chain_id": chain.id,
            "request": submission.model_dump(mode="json", exclude_none=True),
            "model": self.model_of(submission, policy, agent),
            "budget": None if chain.budget is None else chain.budget.model_dump(mode="json"),
            "last_seq": 0,
            "runner_id": owner,
            # Claimed as it is stored: its run's first claim.
            "owner_epoch": 0 if owner is None else 1,
            "agent_name": agent.name,
            "agent_version": agent.version,
            "conversation_id": None if turn is None else turn.conversation_id,
            "file_ids": [str(a.file_id) for a in attachments] or None,
            "roles": sorted(principal.roles),
            "api_key_id": None if principal.api_key is None else UUID(principal.api_key),
            "schedule_id": schedule_id,
            "created_at": now,
            **({} if origin is None else origin.task_columns()),
            **({} if family is None else family.task_columns()),
        }
        chain_row = {
            "id": chain.id,
            "task_id": task_id,
            "tenant_id": principal.tenant_id,
            "agent_id": chain.agent_id,
            "status": ChainStatus.INITIALIZING,
            "metrics": RawJSON(dump_model(chain.metrics)),
            "started_at": now,
            **({} if origin is None else origin.chain_columns()),
            **({} if family is None else {"parent_chain_id": family.parent_chain_id}),
        }
        try:
            await self._queue.create(
                task,
                chain_row,
                max_unfinished=quotas.concurrent_runs if family is None else None,
                after_turns=None if turn is None else turn.turns,
                idempotency=idempotency,
                parent=parent,
            )
        except TooManyUnfinished as exc:
            self._metrics.submission_refused(principal.tenant_id, "concurrent_runs")
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
