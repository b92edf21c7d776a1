"""A live run's stream: events are published once they are stored, and every subscriber
follows the same in-memory list from its own position; publishing wakes them all.

Output deltas (`output_delta`, the model's reply as it streams) are pushed the moment they
come, not stored: each follows the stored event it came after, and only subscribers following
when it is pushed get it. They are kept in a bounded buffer, so a subscriber that falls behind
by more than the buffer holds skips the oldest deltas instead of making the run keep them."""

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from uuid import UUID

from app.security.visibility import StepFacts


@dataclass(frozen=True, slots=True)
class Relay:
    """Where an event of a task's stream comes from when it is not the task's own: one of its
    sub-agents' tasks, `depth` levels down from the family's first task, started by the call
    step `parent_step_id` of the chain one level up."""

    task_id: UUID
    chain_id: UUID
    depth: int
    parent_step_id: UUID | None
    # The call steps it hangs under, from the stream's own task's down to the one that
    # started it: a reader sees its events only where it sees each of those calls whole.
    calls: tuple[StepFacts, ...] = ()

    def under(self, calls: tuple[StepFacts, ...]) -> "Relay":
        """This relay as an ancestor further up sees it, under `calls` more."""
        return Relay(
            self.task_id, self.chain_id, self.depth, self.parent_step_id, (*calls, *self.calls)
        )

    @property
    def fields(self) -> str:
        """What marks a relayed event's JSON, after the child's own fields."""
        step = "null" if self.parent_step_id is None else f'"{self.parent_step_id}"'
        return f',"depth":{self.depth},"parent_step_id":{step}'


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
    # A sub-agent's step relayed into an ancestor's stream.
    relay: Relay | None = None


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a task's stream: `seq` is its SSE id, `data` its JSON; `step` is set on
    `reasoning_step` events, `progress` on `tool_progress` events (the facts of the call's
    step, by which a reader's view shows it), `relay` on a sub-agent's event relayed into
    its ancestor's stream."""

    seq: int
    type: str
    data: str
    step: StepParts | None = field(default=None, repr=False, compare=False)
    progress: StepFacts | None = field(default=None, repr=False, compare=False)
    relay: Relay | None = field(default=None, repr=False, compare=False)
    frame: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Encoded once, however many subscribers receive it.
        frame = f"id: {self.seq}\nevent: {self.type}\ndata: {self.data}\n\n".encode()
        object.__setattr__(self, "frame", frame)


@dataclass(frozen=True, slots=True)
class LiveDelta:
    """An `output_delta` event, its JSON `data` kept only as its SSE frame: live only, so it
    has no `seq` and its frame no `id:`. `after` is the seq of the stored event it follows
    (the events its run had emitted when it came); `facts` are those of its LLM call's step,
    by which a reader's view shows it or not."""

    after: int
    facts: StepFacts
    data: InitVar[str]
    frame: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self, data: str) -> None:
        object.__setattr__(self, "frame", f"event: output_delta\ndata: {data}\n\n".encode())


StreamItem = StreamEvent | LiveDelta | None
"""What a task's stream is made of: stored events, live deltas and keep-alives (None)."""

KEEPALIVE = None
"""What `follow` yields when the stream has been idle for the keep-alive interval."""

DELTA_BUFFER = 256
"""How many of a run's latest deltas its channel keeps for subscribers still on their way to
them (a few hundred bytes each)."""


class RunChannel:
    """The events of one live run, from seq 1, in order and without gaps; and its live deltas,
    each after the event it follows."""

    def __init__(self, *, delta_buffer: int = DELTA_BUFFER, first_seq: int = 1) -> None:
        # A resumed run's channel starts after the events stored before it: those come from
        # the store.
        self.first_seq = first_seq
        self._base = first_seq - 1
        self._events: list[StreamEvent] = []
        self._deltas: deque[LiveDelta] = deque(maxlen=delta_buffer)
        # Deltas ever pushed: a subscriber's position among them, however many the buffer lost.
        self._pushed = 0
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def last_seq(self) -> int:
        return self._base + len(self._events)

    @property
    def closed(self) -> bool:
        return self._closed

    def publish(self, events: Sequence[StreamEvent]) -> None:
        if self._closed:
            raise RuntimeError("the run's stream is closed")
        for offset, event in enumerate(events, start=self.last_seq + 1):
            if event.seq != offset:
                raise ValueError(f"event {event.seq} published where {offset} was due")
        self._events.extend(events)
        self._wake()

    def push(self, delta: LiveDelta) -> None:
        """Hands a delta to the subscribers following now, without waiting for anything
        stored. Deltas come in the order of the events they follow; one pushed after the end
        has nobody to go to and is dropped."""
        if self._closed:
            return
        if self._deltas and delta.after < self._deltas[-1].after:
            raise ValueError(
                f"a delta after {delta.after} pushed behind one after {self._deltas[-1].after}"
            )
        self._deltas.append(delta)
        self._pushed += 1
        self._wake()

    def discard_deltas(self, *, after: int) -> None:
        """Drops the buffered deltas that follow an event past `after`: a run ended here,
        after its last stored event, will never publish the events they follow (no
        subscriber can have had them)."""
        while self._deltas and self._deltas[-1].after > after:
            self._deltas.pop()
            self._pushed -= 1

    async def reached(self, seq: int) -> None:
        """Returns once event `seq` is published (or the channel is closed: it never will be)."""
        while self.last_seq < seq and not self._closed:
            await self._changed.wait()

    def close(self) -> None:
        """No more events: subscribers end once they have read everything."""
        self._closed = True
        self._wake()

    def follow(
        self, after: int = 0, *, keepalive_s: float | None = None, buffered: bool | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """Every event with `seq > after`, the moment it is published, and the deltas that
        follow those events, each right after its event: those pushed from this call on
        (none that follow an event at or before `after`), and for a stream opened from the
        start (`after` 0) also those the buffer still holds — a run is under way before its
        first subscriber (the one that submitted it) comes, and it gets what the model wrote
        so far. A resumed stream gets only the deltas from its return on: the steps hold the
        whole text. `None` (KEEPALIVE) after each idle `keepalive_s`. Ends when the channel
        is closed and its events read to the end. A follower more than the buffer behind on
        deltas skips those the buffer no longer holds."""
        if after < self._base:
            raise ValueError(f"the channel starts after {self._base}, not {after}")
        fresh = after == 0 if buffered is None else buffered
        seen = self._pushed - len(self._deltas) if fresh else self._pushed
        return self._follow(after, seen, keepalive_s)

    async def _follow(
        self, after: int, seen: int, keepalive_s: float | None
    ) -> AsyncGenerator[StreamItem, None]:
        index = after - self._base
        while True:
            if seen < self._pushed:
                oldest = self._pushed - len(self._deltas)
                seen = max(seen, oldest)
                delta = self._deltas[seen - oldest]
                if delta.after <= index + self._base:
                    seen += 1
                    if delta.after >= after:
                        yield delta
                    continue
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
