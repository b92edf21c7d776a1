"""A run's events on their way to their reader: queued in order and counted, so that output
deltas, tools' progress reports and events relayed from other runs take their place among
them."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.chain import ChainEvent, DoneEvent, ReasoningChain, ToolProgressEvent
from app.tools.models import OutputDelta, ToolProgress


class StampedOutput:
    """Where a run's output deltas go, each with `after` set: the run counts here every event
    it emits, so a delta's place in the run's stream is known the moment it comes, without
    waiting for the events before it to be read."""

    __slots__ = ("_deliver", "emitted")

    def __init__(self, deliver: Callable[[OutputDelta], None]) -> None:
        self._deliver = deliver
        self.emitted = 0

    def __call__(self, delta: OutputDelta) -> None:
        self._deliver(
            OutputDelta(
                delta.step_id,
                delta.correlation_id,
                delta.attempt,
                delta.kind,
                delta.text,
                delta.level,
                self.emitted,
            )
        )


# Progress reports kept per call; a tool reporting more has the rest dropped.
MAX_PROGRESS_PER_CALL = 200


class _Released:
    """Ends a released run's events instead of `done`."""


@dataclass(frozen=True, slots=True)
class Relayed:
    """An event of another run shown in this run's stream (a sub-agent's, running for one of
    its calls): queued and counted with the run's own events, so that it takes its place in
    their order. What it carries is the business of whoever relays and records it."""

    event: object


RunEvent = ChainEvent | Relayed
"""What a run's `event_batches` hold: its own events and those relayed into its stream."""


RELEASED = _Released()


class RunReleased(BaseException):
    """Stops a released run at a step boundary: raised where its next call would start. Not
    an `Exception`, so no agent's error handling takes it for a failed call."""


class RunEvents:
    """The queue of a run's events, counted for its output deltas' places; tools' progress
    reports join it as `tool_progress` events of the calls under way. Once the run is
    released nothing more is queued: what it did after that is not its record."""

    __slots__ = (
        "_chain",
        "_output",
        "_per_call",
        "_task_id",
        "closed",
        "emitted",
        "ended",
        "queue",
        "ready",
        "releasing",
        "stored_through",
    )

    def __init__(self, task_id: str, chain: ReasoningChain, output: StampedOutput | None) -> None:
        self._task_id = task_id
        self._chain = chain
        self._output = output
        self._per_call: dict[Any, int] = {}
        self.queue: asyncio.Queue[RunEvent | _Released] = asyncio.Queue()
        self.closed = False
        # Its `done` is queued: nothing may follow it.
        self.ended = False
        self.emitted = 0
        # Returns once the run's first n events are stored (`AgentRun.store_with`).
        self.stored_through: Callable[[int], Awaitable[None]] | None = None
        # Returns once the run may start calls (`AgentRun.store_with`).
        self.ready: Callable[[], Awaitable[None]] | None = None
        # The run was released: it starts no further call (`AgentRun.release`).
        self.releasing = False

    async def stored(self) -> None:
        """Returns once every event queued so far is stored (at once where nothing is). A run
        released while its calls waited for that stops here (`RunReleased`): they were
        recorded but never started, and whoever resumes the run makes them."""
        if self.stored_through is not None:
            await self.stored_through(self.emitted)
            if self.releasing:
                self.close()
                raise RunReleased

    async def may_call(self) -> None:
        """Returns once the run may start calls (at once where nothing holds it back)."""
        if self.ready is not None:
            await self.ready()

    async def starting(self) -> None:
        """A call is about to start (its guards passed): it waits while the run may not start
        calls (`may_call`), and a run released by then stops here (`RunReleased`): the call
        was never made, and whoever resumes the run makes it."""
        await self.may_call()
        if self.releasing:
            self.close()
            raise RunReleased

    def close(self) -> None:
        """The run is released: its events end here."""
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(RELEASED)

    def emit(self, event: RunEvent) -> None:
        if self.closed or self.ended:
            return
        self.ended = isinstance(event, DoneEvent)
        self.queue.put_nowait(event)
        self.emitted += 1
        if self._output is not None:
            self._output.emitted += 1

    def progress(self, report: ToolProgress) -> None:
        step = report.call_step
        call = step.tool_call
        if call is None or self._chain.status.is_terminal:
            return
        count = self._per_call.get(step.id, 0)
        if count >= MAX_PROGRESS_PER_CALL:
            return
        self._per_call[step.id] = count + 1
        self.emit(
            ToolProgressEvent(
                task_id=self._task_id,
                chain_id=self._chain.id,
                step_id=step.id,
                tool_name=call.tool_name,
                tool_type=call.tool_type,
                visibility=step.visibility.level,
                message=report.message[:2000],
                fraction=report.fraction,
            )
        )
