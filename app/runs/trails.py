"""Remote agents' tasks recorded as sub-agents' are: a call of a remote A2A agent opens a task
and chain of its own under the call (`parent_task_id`, `parent_step_id`, `depth`, the parent
chain's `child_chain_ids`), whose steps are the remote task's updates as they stream (each a
`thinking` step) and whose answer is the remote's (a `synthesis` step). It is stored, streamed
and relayed into its ancestors' streams by the same machinery as any run, so the console nests
it under the call and a family's stream carries it.

A trail records; it spends nothing itself: what the remote reported it used is the call's
usage, billed by the call. A trail never outlives its call: the call's end (its answer, its
error, its cancel) ends it, and one left unfinished by an instance that stopped mid-call is
ended when its parent's run resumes (`end_stale`), since the call it recorded will not be
made again."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any
from uuid import UUID

from app.agents import AgentTask, CoTAgent, ReasoningEngine
from app.chain import (
    ChainMetrics,
    ChainStatus,
    ErrorCode,
    ReasoningChain,
    TaskState,
    VisibilityLevel,
)
from app.chain.errors import ChainAbort
from app.chain.models import utc_now
from app.ids import uuid4
from app.runs.active import ActiveRuns
from app.runs.recorder import facts_of
from app.storage.records import TaskRecord
from app.storage.runs import TaskQueue
from app.storage.runs.queue import held_by
from app.storage.text import dump_model
from app.storage.types import RawJSON
from app.tools.errors import ToolError
from app.tools.executor import ToolExecutor
from app.tools.models import ChildRun, ToolCallContext
from app.tools.services import NO_SERVICES

REMOTE_AGENT = "remote_agent"
"""The key of a trail's stored request that names the remote agent whose task it records."""


def is_trail(task: TaskRecord) -> bool:
    """Whether the task records a remote agent's task (rather than running an agent here)."""
    return REMOTE_AGENT in task.request


class _TrailAgent(CoTAgent):
    """Adds what its trail is told, as it is told: an update is a thought, the answer the
    synthesis; a failure ends its chain with the call's error code. It makes no call."""

    agent_id = "a2a"

    def __init__(
        self,
        executor: ToolExecutor,
        told: asyncio.Queue[tuple[str, Any]],
        level: VisibilityLevel,
    ) -> None:
        super().__init__(executor, default_model="")
        self._told = told
        self._level = level  # its call's: its steps say what the call's say

    async def reason(self, task: AgentTask, engine: ReasoningEngine) -> None:
        while True:
            kind, what = await self._told.get()
            if kind == "note":
                engine.add_thinking(what, visibility=self._level)
            elif kind == "answer":
                engine.add_synthesis(what, [], visibility=self._level)
                return
            else:
                code, message = what
                raise ChainAbort(code, message)


class _Trail:
    """One call's trail (the `Trail` its tool writes to)."""

    def __init__(
        self,
        task: TaskRecord,
        told: asyncio.Queue[tuple[str, Any]],
        redact: Callable[[str], str] = str,
    ) -> None:
        self.task = task
        self._told = told
        # What the other agent says may echo what it was sent (a secret header): masked as
        # the call's own result is.
        self._redact = redact
        self.answered = False

    @property
    def child(self) -> ChildRun:
        return ChildRun(task_id=self.task.id, chain_id=self.task.chain_id, billed=False)

    def note(self, text: str) -> None:
        if not self.answered:
            self._told.put_nowait(("note", self._redact(text)))

    def answer(self, text: str) -> None:
        if not self.answered:
            self.answered = True
            self._told.put_nowait(("answer", self._redact(text)))

    def fail(self, code: ErrorCode, message: str) -> None:
        if not self.answered:
            self.answered = True
            self._told.put_nowait(("fail", (code, self._redact(message))))


class RunTrails:
    """The `Trails` of one run (`task`, running `chain` here): each call's trail stored as
    its child task, owned by this instance (`me`), and followed by the active runs."""

    def __init__(
        self,
        queue: TaskQueue,
        active: ActiveRuns,
        executor: ToolExecutor,
        task: TaskRecord,
        chain: ReasoningChain,
        *,
        me: str,
        actor: str,
    ) -> None:
        self._queue = queue
        self._active = active
        self._executor = executor
        self._task = task
        self._chain = chain
        self._me = me
        self._actor = actor

    @contextlib.asynccontextmanager
    async def open(
        self, context: ToolCallContext, agent: str, message: str
    ) -> AsyncIterator[_Trail]:
        task = await self._store(context, agent, message)
        told: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        chain = ReasoningChain(
            id=task.chain_id,
            task_id=str(task.id),
            agent_id=_agent_id(agent),
            tenant_id=task.tenant_id,
            started_at=task.created_at,
        )
        call = context.call_step
        assert call is not None, "the executor sets every call's step"
        assert call.tool_call is not None
        level = VisibilityLevel(call.visibility.level)
        # From here to the run being followed nothing awaits.
        self._chain.adopt(chain)
        run = _TrailAgent(self._executor, told, level).start(
            AgentTask(id=str(task.id), input=message, tenant_id=task.tenant_id), chain=chain
        )
        self._active.follow(
            run,
            task,
            chain,
            actor=self._actor,
            sensitive_fields=frozenset(),
            seen_as=(call.tool_call.tool_type, call.tool_call.tool_name),
            call=facts_of(call),
        )
        trail = _Trail(task, told, (context.services or NO_SERVICES).redact)
        context.started.append(trail.child)
        try:
            yield trail
        except asyncio.CancelledError:
            run.cancel("its call was cancelled")
            await asyncio.shield(self._active.left(task.id))
            raise
        except ToolError as exc:
            trail.fail(exc.error_code or ErrorCode.TOOL_ERROR, str(exc))
            raise
        except BaseException as exc:
            trail.fail(ErrorCode.INTERNAL_ERROR, f"the call failed ({type(exc).__name__})")
            raise
        finally:
            if not trail.answered:
                trail.fail(ErrorCode.TOOL_ERROR, "the call ended without an answer")
            # Its end is stored (and relayed) before the call's result step.
            await asyncio.shield(self._active.left(task.id))

    async def _store(self, context: ToolCallContext, agent: str, message: str) -> TaskRecord:
        parent, now = self._task, utc_now()
        step = context.call_step
        assert step is not None, "the executor sets every call's step"
        task_id, chain_id, metrics = uuid4(), uuid4(), ChainMetrics()
        task: dict[str, Any] = {
            "id": task_id,
            "tenant_id": parent.tenant_id,
            "user_id": parent.user_id,
            "status": TaskState.SUBMITTED,
            "chain_id": chain_id,
            "request": {"input": message, REMOTE_AGENT: agent},
            "model": _agent_id(agent),
            "last_seq": 0,
            "runner_id": self._me,
            "owner_epoch": 1,
            "agent_name": agent,
            "roles": parent.roles,
            "api_key_id": parent.api_key_id,
            "created_at": now,
            "parent_task_id": parent.id,
            "parent_step_id": step.id,
            "root_task_id": parent.root_task_id or parent.id,
            "depth": parent.depth + 1,
        }
        await self._queue.create(
            task,
            {
                "id": chain_id,
                "task_id": task_id,
                "tenant_id": parent.tenant_id,
                "agent_id": _agent_id(agent),
                "status": ChainStatus.INITIALIZING,
                "metrics": RawJSON(dump_model(metrics)),
                "started_at": now,
                "parent_chain_id": self._chain.id,
            },
            parent=(parent.id, held_by(parent)),
        )
        return TaskRecord.model_validate(
            {
                **task,
                "usage": metrics,
                "final_answer": None,
                "error_code": None,
                "error_message": None,
                "started_at": None,
                "finished_at": None,
            }
        )


def _agent_id(agent: str) -> str:
    """What a trail's chain and task name as their agent and model: the remote agent."""
    return f"a2a:{agent}"


async def stale_trails(queue: TaskQueue, task_id: UUID) -> list[TaskRecord]:
    """The unfinished trails of a task: left by an instance that stopped mid-call."""
    return [c for c in await queue.children(task_id) if is_trail(c) and not c.is_finished]
