"""Replays and forks of a recorded task, on behalf of a caller within its tenant.

A replay runs the task again with every LLM and tool result taken from its chain (no call is
made, nothing billed) and reports whether the run repeated the chain step for step; a fork
takes the chain's steps up to one as recorded and goes on live from there, with the changes
given (agent version, model, input)."""

from dataclasses import replace
from uuid import UUID

from app.chain import ReasoningStep
from app.chain.replay import ReplayMatch
from app.errors import OmniForgeError
from app.governance.callers import Caller
from app.runs.agents import ResolvedAgent, agent_version, resolve_agent
from app.runs.errors import Forbidden, InvalidSubmission
from app.runs.manager import SubmittedTask
from app.runs.models import Origin, TaskSubmission
from app.runs.tasks.inputs import turn_history
from app.runs.tasks.service import TaskService
from app.security.rbac import Permission
from app.storage.records import TaskRecord
from app.tools.errors import FieldError


class UnfinishedSource(OmniForgeError):
    """A replay of a task that has not ended: only a finished task's chain is replayed."""

    def __init__(self, task_id: UUID, status: str) -> None:
        super().__init__(
            f"task {task_id} is {status}: only a finished task's chain can be replayed"
        )


async def replay_task(
    tasks: TaskService, caller: Caller, task_id: UUID, *, agent: str | None, match: ReplayMatch
) -> SubmittedTask:
    """Starts a replay of the caller's tenant's finished task `task_id`, with the agent
    version it ran or the one `agent` names."""
    source = await _source(tasks, caller, task_id)
    if not source.is_finished:
        raise UnfinishedSource(task_id, source.status)
    resolved = await _agent(tasks, caller, source, agent)
    submission = _resubmission(source, resolved)
    origin = Origin(source.id, source.chain_id, match=match)
    return await _start(tasks, caller, source, submission, resolved, origin)


async def fork_task(
    tasks: TaskService,
    caller: Caller,
    task_id: UUID,
    *,
    from_step: int,
    agent: str | None,
    model: str | None,
    input: str | None,
) -> SubmittedTask:
    """Starts a fork of the caller's tenant's task `task_id`: its steps up to `from_step` as
    recorded, then live, with the agent, model and input given (each default: the task's)."""
    source = await _source(tasks, caller, task_id)
    stored = await tasks.stores.streams.chain_steps(source.chain_id)
    steps = [ReasoningStep.model_validate_json(step) for step in stored]
    _check_fork_step(steps, from_step)
    resolved = await _agent(tasks, caller, source, agent)
    submission = _resubmission(source, resolved)
    changes: dict[str, object] = {}
    if model is not None:
        changes["model"] = model
    if input is not None:
        changes.update(input=input, messages=None)
    if changes:
        submission = TaskSubmission.model_validate(
            {**submission.model_dump(exclude_none=True), **changes}
        )
    origin = Origin(source.id, source.chain_id, fork_step=from_step)
    return await _start(tasks, caller, source, submission, resolved, origin)


async def _source(tasks: TaskService, caller: Caller, task_id: UUID) -> TaskRecord:
    """The task to replay or fork: the new task copies its chain, which the caller must be
    allowed to read (besides creating tasks)."""
    source = await tasks.find(caller, task_id)
    if Permission.CHAIN_READ not in caller.permissions:
        raise Forbidden(
            "a replay or a fork copies the task's chain: it needs `chain:read`",
            permission=Permission.CHAIN_READ,
        )
    return source


async def _start(
    tasks: TaskService,
    caller: Caller,
    source: TaskRecord,
    submission: TaskSubmission,
    agent: ResolvedAgent,
    origin: Origin,
) -> SubmittedTask:
    given = [UUID(file_id) for file_id in source.file_ids or []]
    attachments = await tasks.inputs.files(caller.tenant_id, [], given=given)
    async with tasks.database.read() as connection:
        origin = replace(origin, history=await turn_history(connection, source))
    return await tasks.runs.submit(
        caller.principal,
        submission,
        await tasks.inputs.caller_policy(caller),
        agent,
        None,
        attachments,
        origin=origin,
    )


async def _agent(
    tasks: TaskService, caller: Caller, source: TaskRecord, ref: str | None
) -> ResolvedAgent:
    """The agent version named, else the exact one the task ran (archived or not)."""
    async with tasks.database.read() as connection:
        if ref is not None:
            return await resolve_agent(connection, caller.tenant_id, ref)
        found = await agent_version(
            connection, caller.tenant_id, source.agent_name, source.agent_version
        )
    if found is None:
        problem = f"the agent version task {source.id} ran is gone: name one (`agent`)"
        raise InvalidSubmission([FieldError("agent", problem)])
    return found


def _resubmission(source: TaskRecord, agent: ResolvedAgent) -> TaskSubmission:
    """The task as it was submitted, run by `agent` on the model it ran on (unless the agent
    fixes its own), outside any conversation: a turn's history comes from its source
    (`RunInputs.load`), and a replay or a fork adds no turn."""
    request = {**source.request, "agent": agent.ref, "stream_output": False}
    request.pop("conversation_id", None)
    request.pop("file_ids", None)  # the source's files are given again, as it had them
    if agent.definition.model is None:
        request["model"] = source.model
    else:
        request.pop("model", None)
    return TaskSubmission.model_validate(request)


def _check_fork_step(steps: list[ReasoningStep], from_step: int) -> None:
    """A fork takes whole calls: it may not start between a call and its result."""
    if from_step > len(steps):
        problem = f"the task's chain has {len(steps)} steps; fork from one of them"
        raise InvalidSubmission([FieldError("from_step", problem)])
    calls = {s.tool_call.correlation_id: s.step_number for s in steps if s.tool_call is not None}
    open_calls = [
        (calls[s.tool_result.correlation_id], s.step_number)
        for s in steps
        if s.tool_result is not None
        and s.step_number > from_step
        and calls.get(s.tool_result.correlation_id, from_step + 1) <= from_step
    ]
    if open_calls:
        call, result = min(open_calls)
        problem = (
            f"step {from_step} is between the call at step {call} and its result at step "
            f"{result}: fork from step {call - 1} (before the call) or from step {result} "
            "or later (with its result as recorded)"
        )
        raise InvalidSubmission([FieldError("from_step", problem)])
