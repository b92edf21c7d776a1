"""A running task: its reasoning in a background task, the events it emits, and how it
ends: completed, failed, cancelled, suspended for approvals, or released to be resumed."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.agents.engine import ReasoningEngine
from app.agents.models import AgentTask
from app.agents.run_events import RELEASED, Relayed, RunEvent, RunEvents, RunReleased
from app.chain import (
    ApprovalDecidedEvent,
    ApprovalRequiredEvent,
    BudgetLimit,
    BudgetWarningEvent,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    ChainStartedEvent,
    ChainStatus,
    DoneEvent,
    ErrorCode,
    ReasoningChain,
    ReasoningStep,
    ReasoningStepEvent,
    SynthesisInfo,
    TaskState,
    TaskStatusEvent,
)
from app.chain.budget import WARNING_RATIO, nearly_used
from app.chain.errors import ChainAbort
from app.chain.models import ChainDiverged
from app.tools.approvals import ApprovalPending

if TYPE_CHECKING:
    from app.agents.base import CoTAgent

logger = logging.getLogger(__name__)

_FINAL_STATES = {
    ChainStatus.COMPLETED: TaskState.COMPLETED,
    ChainStatus.INCOMPLETE: TaskState.INCOMPLETE,
    ChainStatus.FAILED: TaskState.FAILED,
    ChainStatus.CANCELLED: TaskState.CANCELLED,
}


class AgentRun:
    """One running task: its chain, its events (one reader), and `cancel`."""

    def __init__(
        self,
        agent: "CoTAgent",
        task: AgentTask,
        engine: ReasoningEngine,
        events: RunEvents,
        *,
        resumed: bool = False,
        decided: Sequence[ApprovalDecidedEvent] = (),
    ) -> None:
        self.task = task
        self.chain = engine.chain
        self._agent = agent
        self._engine = engine
        self._events = events
        self._queue = events.queue
        self._cancel_reason: str | None = None
        self._cancel_code = ErrorCode.CANCELLED
        self._cancel_details: dict[str, Any] = {}
        self._budget_warned = False
        self._timers: list[asyncio.TimerHandle] = []
        # Calls under way, by correlation id: a release lets them finish (see `release`).
        self._under_way: set[Any] = set()
        # Results this run recorded (not those of stored steps a resumed run replays).
        self.results_made = 0
        self._suspended = False
        self.chain.add_listener(self._on_step)
        self.chain.status = ChainStatus.THINKING
        if resumed:
            self._emit(
                TaskStatusEvent(
                    task_id=task.id, chain_id=self.chain.id, state=TaskState.WORKING, resumed=True
                )
            )
            for event in decided:
                self._emit(event)
        else:
            self._emit(ChainStartedEvent(task_id=task.id, chain_id=self.chain.id))
            self._emit(
                TaskStatusEvent(task_id=task.id, chain_id=self.chain.id, state=TaskState.WORKING)
            )
        self._runner = asyncio.create_task(self._run(), name=f"agent-run-{task.id}")
        self._watch_duration()

    async def events(self) -> AsyncIterator[ChainEvent]:
        """Every event of the run, in order, the moment it exists; ends after `done`. A reader
        that stops early cancels the run."""
        async with contextlib.aclosing(self.event_batches()) as batches:
            async for batch in batches:
                for event in batch:
                    if not isinstance(event, Relayed):
                        yield event

    async def event_batches(self) -> AsyncGenerator[list[RunEvent], None]:
        """The same events, in batches of whatever has accumulated since the last read (at
        least one), so a slower reader such as a database writer catches up in one go; with
        them, in their place, those `relay`ed into the run's stream."""
        try:
            while True:
                item = await self._queue.get()
                if item is RELEASED:
                    return
                batch: list[RunEvent] = [item]  # type: ignore[list-item]
                released = False
                while not self._queue.empty():
                    more = self._queue.get_nowait()
                    if more is RELEASED:
                        released = True
                        break
                    batch.append(more)  # type: ignore[arg-type]
                yield batch
                if released or isinstance(batch[-1], DoneEvent):
                    return
        finally:
            if not self._runner.done():
                self.cancel("the reader of the run's events went away")
                await asyncio.wait([self._runner])

    def cancel(
        self,
        reason: str = "the run was cancelled",
        error_code: ErrorCode = ErrorCode.CANCELLED,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Stops the run promptly, even mid-call; the chain ends `cancelled` (or `failed`
        with another `error_code`, e.g. `interrupted` at shutdown), steps kept."""
        if not self._runner.done() and self._cancel_reason is None:
            self._cancel_reason = reason
            self._cancel_code = error_code
            self._cancel_details = details or {}
            self._runner.cancel()

    def relay(self, event: object) -> bool:
        """Queues another run's event to be recorded in this run's stream, after the events
        this run emitted so far; False once this run's events have ended (released, or its
        `done` queued): nothing may follow them."""
        events = self._events
        if events.closed or events.ended:
            return False
        events.emit(Relayed(event))
        return True

    def store_with(
        self,
        stored_through: Callable[[int], Awaitable[None]],
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """What stores the run's events: `stored_through(n)` returns once its first n events
        are stored. A call that must not be made twice waits for it before it starts; every
        call waits for `ready` (what holds calls back while their results could not be
        stored)."""
        self._events.stored_through = stored_through
        self._events.ready = ready

    @property
    def calls_under_way(self) -> int:
        """Calls started whose results have not come."""
        return len(self._under_way)

    @property
    def released(self) -> bool:
        """Whether the run was released: its events ended without `done`, for another run of
        the task to go on from what is stored."""
        return self._events.closed

    def release(self, *, now: bool = False) -> None:
        """Stops the run without ending its task, so that it can be resumed from its stored
        steps: as soon as the calls under way have their results (none is made twice, paid
        model calls included), and before any further call starts; with `now`, at once (the
        calls under way are cut, and made again by whoever resumes it). Its events end with
        the last step it completed (no `done`)."""
        if self._runner.done() or self._cancel_reason is not None:
            return
        self._events.releasing = True
        if now or not self._under_way:
            self._stop_released()

    def _stop_released(self) -> None:
        if self._runner.done() or self._cancel_reason is not None or self._events.closed:
            return
        self._events.close()
        self._runner.cancel()

    def _watch_duration(self) -> None:
        """With a `max_duration_s` budget: a warning at 80 % of it, and a stop at 100 %,
        even in the middle of a call."""
        budget = self.chain.budget
        if budget is None or budget.max_duration_s is None:
            return
        loop = asyncio.get_running_loop()
        limit = budget.max_duration_s
        elapsed = self.chain.usage().duration_s
        self._timers = [
            loop.call_later(
                max(float(WARNING_RATIO) * limit - elapsed, 0),
                self._warn,
                [BudgetLimit.MAX_DURATION_S],
            ),
            loop.call_later(
                max(limit - elapsed, 0),
                self.cancel,
                f"budget max_duration_s ({limit:g} s) reached",
                ErrorCode.BUDGET_EXCEEDED,
                {"limit": BudgetLimit.MAX_DURATION_S, "limit_value": limit},
            ),
        ]

    async def wait(self) -> ReasoningChain:
        """Waits for the run to end and returns its chain."""
        await asyncio.wait([self._runner])
        return self.chain

    @property
    def done(self) -> bool:
        return self._runner.done()

    async def _run(self) -> None:
        try:
            await self._agent.reason(self.task, self._engine)
        except RunReleased:
            pass  # its events ended where it stopped (`_on_step`)
        except ApprovalPending as waiting:
            self._suspend(waiting)
        except ChainDiverged as exc:
            if self.chain.replays_recording:
                self._finish(ChainStatus.FAILED, ErrorCode.REPLAY_DIVERGED, f"it {exc}")
            else:
                self._finish(
                    ChainStatus.FAILED, ErrorCode.INTERRUPTED, f"it cannot be resumed: {exc}"
                )
        except asyncio.CancelledError:
            if self._events.closed:
                return  # released
            code = self._cancel_code
            status = ChainStatus.CANCELLED if code is ErrorCode.CANCELLED else ChainStatus.FAILED
            self._finish(status, code, self._cancel_reason, self._cancel_details)
            if self._cancel_reason is None:
                raise  # not our cancel(): let whoever cancelled the task see it
        except ChainAbort as abort:
            self._finish(ChainStatus.FAILED, abort.error_code, abort.message, abort.details)
        except Exception as exc:
            logger.exception("agent run %s failed", self.task.id)
            self._finish(
                ChainStatus.FAILED, ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
            )
        else:
            unreplayed = self.chain.unreplayed()
            if unreplayed is not None:
                message = f"it diverged: {unreplayed.describe()}"
                self._finish(ChainStatus.FAILED, ErrorCode.REPLAY_DIVERGED, message)
                return
            answer = _conclusion(self.chain)
            # An answer given because a limit stopped the run (`on_limit: answer`).
            stopped = answer is not None and answer.stop_reason is not None
            self._finish(ChainStatus.INCOMPLETE if stopped else ChainStatus.COMPLETED)

    @property
    def suspended(self) -> bool:
        """Whether the run stopped to wait for approvals: released, its task to wait
        (`input_required`) until they are decided."""
        return self._suspended

    def _suspend(self, waiting: ApprovalPending) -> None:
        for timer in self._timers:
            timer.cancel()
        for call in waiting.pending:
            self._emit(
                ApprovalRequiredEvent(
                    task_id=self.task.id,
                    chain_id=self.chain.id,
                    approval_id=call.approval_id,
                    step_id=call.call_step.id,
                    tool_name=call.tool_name,
                    tool_type=call.tool_type,
                    visibility=call.call_step.visibility.level,
                    arguments=call.arguments,
                    expires_at=call.expires_at,
                    note=call.note,
                )
            )
        self._emit(
            TaskStatusEvent(
                task_id=self.task.id, chain_id=self.chain.id, state=TaskState.INPUT_REQUIRED
            )
        )
        self._suspended = True
        self._events.close()

    def _finish(
        self,
        status: ChainStatus,
        error_code: ErrorCode | None = None,
        message: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        chain = self.chain
        for timer in self._timers:
            timer.cancel()
        chain.finish(status, error_code, message)
        chain.remove_listener(self._on_step)
        metrics = chain.metrics.model_copy()
        if error_code is None:
            answer = _conclusion(chain)
            self._emit(
                ChainCompletedEvent(
                    task_id=self.task.id,
                    chain_id=chain.id,
                    answer=None if answer is None else answer.conclusion,
                    output=None if answer is None else answer.output,
                    stop_reason=None if answer is None else answer.stop_reason,
                    metrics=metrics,
                )
            )
        else:
            self._emit(
                ChainFailedEvent(
                    task_id=self.task.id,
                    chain_id=chain.id,
                    error_code=error_code,
                    error_message=message or error_code.value,
                    details=details or {},
                    metrics=metrics,
                )
            )
        self._emit(
            DoneEvent(task_id=self.task.id, chain_id=chain.id, final_state=_FINAL_STATES[status])
        )

    def _on_step(self, step: ReasoningStep) -> None:
        if self._events.releasing:
            if step.tool_call is not None:
                # A released run starts no further call: it stops here, this step unrecorded.
                self._events.close()
                raise RunReleased
            if step.tool_result is not None:
                self._result(step.tool_result.correlation_id)
                if not self._under_way:
                    asyncio.get_running_loop().call_soon(self._stop_released)
        elif step.tool_call is not None:
            self._under_way.add(step.tool_call.correlation_id)
        elif step.tool_result is not None:
            self._result(step.tool_result.correlation_id)
        self._emit(
            ReasoningStepEvent(
                task_id=self.task.id,
                chain_id=self.chain.id,
                timestamp=step.timestamp,
                step=step,
                metrics=self.chain.metrics.model_copy(),
            )
        )
        budget = self.chain.budget
        if budget is not None and not self._budget_warned:
            limits = nearly_used(budget, self.chain.usage())
            if limits:
                self._warn(limits)

    def _result(self, correlation_id: Any) -> None:
        self._under_way.discard(correlation_id)
        self.results_made += 1

    def _warn(self, limits: list[BudgetLimit]) -> None:
        if self._budget_warned or self.chain.budget is None or self.chain.status.is_terminal:
            return
        self._budget_warned = True
        self._emit(
            BudgetWarningEvent(
                task_id=self.task.id,
                chain_id=self.chain.id,
                limits=limits,
                budget=self.chain.budget,
                metrics=self.chain.metrics.model_copy(),
            )
        )

    def _emit(self, event: ChainEvent) -> None:
        self._events.emit(event)


def _conclusion(chain: ReasoningChain) -> SynthesisInfo | None:
    """The chain's answer: its last synthesis step's."""
    for step in reversed(chain.steps):
        if step.synthesis is not None:
            return step.synthesis
    return None
