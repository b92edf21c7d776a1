"""A live run's stream: events are published once they are stored, and every subscriber
follows the same in-memory list from its own position; publishing wakes them all."""

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from app.security.visibility import StepFacts


@dataclass(frozen=True, slots=True)
class StepParts:
    """A `reasoning_step` event's parts, so a reader's view of the step can be rendered
    without decoding the event: the step's and the metrics' JSON text, and the facts the
    visibility filter decides by."""

    task_id: UUID
    chain_id: UUID
    timestamp: datetime
    step: str
    metrics: str
    facts: StepFacts


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a task's stream: `seq` is its SSE id, `data` its JSON; `step` is set on
    `reasoning_step` events."""

    seq: int
    type: str
    data: str
    step: StepParts | None = field(default=None, repr=False, compare=False)
    frame: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Encoded once, however many subscribers receive it.
        frame = f"id: {self.seq}\nevent: {self.type}\ndata: {self.data}\n\n".encode()
        object.__setattr__(self, "frame", frame)


KEEPALIVE = None
"""What `follow` yields when the stream has been idle for the keep-alive interval."""


class RunChannel:
    """The events of one live run, from seq 1, in order and without gaps."""

    def __init__(self) -> None:
        self._events: list[StreamEvent] = []
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def last_seq(self) -> int:
        return len(self._events)

    def publish(self, events: Sequence[StreamEvent]) -> None:
        if self._closed:
            raise RuntimeError("the run's stream is closed")
        for offset, event in enumerate(events, start=len(self._events) + 1):
            if event.seq != offset:
                raise ValueError(f"event {event.seq} published where {offset} was due")
        self._events.extend(events)
        self._wake()

    def close(self) -> None:
        """No more events: subscribers end once they have read everything."""
        self._closed = True
        self._wake()

    async def follow(
        self, after: int = 0, *, keepalive_s: float | None = None
    ) -> AsyncIterator[StreamEvent | None]:
        """Every event with `seq > after`, the moment it is published; `None` (KEEPALIVE)
        after each idle `keepalive_s`. Ends when the channel is closed and read to the end."""
        index = after
        while True:
            if index < len(self._events):
                event = self._events[index]
                index += 1
                yield event
                continue
            if self._closed:
                return
            changed = self._changed
            if keepalive_s is None:
                await changed.wait()
                continue
            try:
                async with asyncio.timeout(keepalive_s):
                    await changed.wait()
            except TimeoutError:
                yield KEEPALIVE

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
