"""Following chaos tasks' streams to their `done` through faults, as a careful SSE client does.

A `Follower` reads one task's `GET /api/v1/tasks/{id}/events`. When its connection drops, is
refused, answers an error status or ends without `done`, it connects again, to the next live
instance (in start order), with `Last-Event-ID` = the highest id it received; it waits only
as `Retry-After` or its backoff says. It keeps every event it received, duplicates included,
with the instance and connection it came on and its arrival time, and reads on after `done`
until the server closes the stream. Nothing here asserts invariants: `invariants` does."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import httpx

from tests.chaos.fleet import Fleet, is_live
from tests.chaos.retries import RETRY_STATUSES, Backoff
from tests.chaos.submit import Submitted
from tests.cluster import Instance
from tests.sse import read_sse

# Several keep-alives (fleet.KEEPALIVE_S): a connection silent for this long is dead.
READ_TIMEOUT_S = 8.0


@dataclass(frozen=True)
class ReceivedEvent:
    """One event as a follower received it. `connection` indexes `Received.connections`."""

    id: int | None
    type: str
    data: str
    instance: str
    connection: int
    received_at: datetime

    @cached_property
    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def created_at(self) -> datetime | None:
        """When the service made the event: a step's own timestamp, else the event's."""
        body = self.json
        if not isinstance(body, dict):
            return None
        step = body.get("step")
        stamp = step.get("timestamp") if isinstance(step, dict) else body.get("timestamp")
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None

    @property
    def lag_s(self) -> float | None:
        """From its making to its arrival here."""
        made = self.created_at
        return None if made is None else (self.received_at - made).total_seconds()


@dataclass
class Connection:
    """One connection of a follower: where, when, from which id, and how it ended
    (`open`, `closed after done`, `ended without done`, `status 503`, or an httpx error)."""

    instance: str
    opened_at: datetime
    last_event_id: int | None
    outcome: str = "open"


@dataclass
class Received:
    """Everything one follower received, over all its connections, in arrival order."""

    events: list[ReceivedEvent] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return any(event.type == "done" for event in self.events)

    @property
    def last_id(self) -> int | None:
        return max((e.id for e in self.events if e.id is not None), default=None)

    def llm_results(self) -> int:
        """Distinct `tool_result` steps of LLM calls received: calls whose reply is stored."""
        return len(
            {
                event.id
                for event in self.events
                if event.type == "reasoning_step"
                and event.json["step"]["type"] == "tool_result"
                and event.json["step"]["tool_result"].get("tool_type") == "llm"
            }
        )

    def live_events(self) -> list[ReceivedEvent]:
        """The events made while their connection was open (not replayed from the store):
        the ones whose lag measures delivery."""
        return [
            event
            for event in self.events
            if (made := event.created_at) is not None
            and made >= self.connections[event.connection].opened_at
        ]

    def describe(self) -> str:
        where = ", ".join(f"{c.instance}@{c.last_event_id}: {c.outcome}" for c in self.connections)
        return f"up to id {self.last_id} [{where}]"


@dataclass
class Follower:
    """Follows chaos task `marker` (`task_id`) on `fleet`, first on instance `first`."""

    fleet: Fleet
    task_id: str
    marker: int
    first: str
    received: Received = field(default_factory=Received)

    @property
    def done(self) -> bool:
        return self.received.done

    async def follow(self) -> None:
        """Connects until the stream ended after `done`; bound it with a timeout."""
        backoff = Backoff()
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {self.fleet.token}"},
            timeout=httpx.Timeout(10.0, read=READ_TIMEOUT_S),
        ) as client:
            instance = self.fleet.instances[self.first]
            while True:
                wait = await self._connect(client, instance, backoff)
                if self.done:
                    return
                self.fleet.changes.notify()
                await asyncio.sleep(wait)
                instance = self._next_after(instance.name)

    def describe(self) -> str:
        return f"chaos task {self.marker} ({self.task_id}) {self.received.describe()}"

    async def _connect(
        self, client: httpx.AsyncClient, instance: Instance, backoff: Backoff
    ) -> float:
        """One connection; returns how long to wait before the next (if any)."""
        received = self.received
        last = received.last_id
        headers = {"Last-Event-ID": str(last)} if last is not None else {}
        connection = Connection(instance.name, datetime.now(UTC), last)
        received.connections.append(connection)
        index = len(received.connections) - 1
        url = f"{instance.base_url}/api/v1/tasks/{self.task_id}/events"
        try:
            async with client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")
                    connection.outcome = f"status {response.status_code}"
                    if response.status_code not in RETRY_STATUSES:
                        raise AssertionError(f"{self.describe()}: {text}")
                    return backoff.next_s(response)
                async for sse in read_sse(response):
                    received.events.append(
                        ReceivedEvent(
                            sse.id, sse.event, sse.data, instance.name, index, datetime.now(UTC)
                        )
                    )
                    backoff.reset()
                    self.fleet.changes.notify()
        except httpx.TransportError as exc:
            connection.outcome = type(exc).__name__
            return backoff.next_s()
        connection.outcome = "closed after done" if self.done else "ended without done"
        return backoff.next_s()

    def _next_after(self, name: str) -> Instance:
        names = list(self.fleet.instances)
        order = names[names.index(name) + 1 :] + names[: names.index(name) + 1]
        for candidate in order:
            if is_live(self.fleet.instances[candidate]):
                return self.fleet.instances[candidate]
        raise AssertionError(f"{self.describe()}: no live instance left to follow it on")


@dataclass
class Followers:
    """One follower per submitted task, by marker; `until_done()` returns once every one
    read its stream to the end after `done`, and raises what stopped one (a timeout, an
    answer no retry can change)."""

    by_marker: dict[int, Follower]
    running: "asyncio.Task[None] | None" = None

    def __iter__(self) -> Iterator[Follower]:
        return iter(self.by_marker.values())

    async def until_done(self) -> None:
        assert self.running is not None, "not following: use following()"
        await self.running

    def all_done(self) -> bool:
        return all(follower.done for follower in self)

    def describe_unfinished(self) -> str:
        return "; ".join(f.describe() for f in self if not f.done) or "none unfinished"

    def live_lags_s(self) -> list[float]:
        """The lag of every live event received, sorted."""
        return sorted(
            lag
            for follower in self
            for event in follower.received.live_events()
            if (lag := event.lag_s) is not None
        )


@asynccontextmanager
async def following(
    fleet: Fleet,
    submitted: Iterable[Submitted],
    *,
    deadline_s: float,
    on_other: bool = False,
    on: str | None = None,
) -> AsyncIterator[Followers]:
    """Follows every submitted task from now until its `done`, all within `deadline_s` (else
    `until_done()` raises `AssertionError` naming the unfinished ones). Each follower starts
    on the instance that accepted its task or, with `on_other`, every second pair of them on
    the next instance (with tasks submitted round-robin, each instance then has followers of
    its own tasks and of others'), or with `on`, on that instance. Followers still running
    at the end of the block are stopped; a failure of theirs that the block did not await is
    raised then."""
    followers = Followers({})
    names = list(fleet.instances)
    for turn, task in enumerate(submitted):
        first = task.instance
        if on_other and (turn // 2) % 2:
            first = names[(names.index(first) + 1) % len(names)]
        if on is not None:
            first = on
        followers.by_marker[task.marker] = Follower(fleet, task.task_id, task.marker, first)

    async def follow_all() -> None:
        try:
            async with asyncio.timeout(deadline_s), asyncio.TaskGroup() as group:
                for follower in followers:
                    group.create_task(follower.follow())
        except TimeoutError:
            raise AssertionError(
                f"streams not done within {deadline_s} s: {followers.describe_unfinished()}"
            ) from None
        except ExceptionGroup as failed:
            reasons = "; ".join(f"{type(e).__name__}: {e}" for e in failed.exceptions)
            raise AssertionError(f"following failed: {reasons}") from failed

    running = followers.running = asyncio.create_task(follow_all())
    try:
        yield followers
    except BaseException:
        running.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await running  # the block's failure is the one to report
        raise
    if running.done():
        running.result()
    else:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
