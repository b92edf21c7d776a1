"""Notices between the instances that share a database: ids only, never data (the data is read
from the store). On Postgres they travel by `LISTEN/NOTIFY` on one connection per process and
arrive at COMMIT; on the embedded SQLite, which one process serves, they stay in the process.

Channels:

- `QUEUE`: a task became claimable (submitted, released by a draining instance, or left by a
  dead one). Payload: empty.
- `EVENTS`: events of runs were stored. Payload: `task_id:last_seq` pairs, comma-separated.
- `CANCEL`: a cancel was requested for a task. Payload: its id.
- `APPROVALS`: tool calls began to wait for a human (their timeouts are to be watched).
  Payload: empty.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from uuid import UUID

import asyncpg

from app.storage.database import Database

logger = logging.getLogger(__name__)

QUEUE = "omniforge_queue"
EVENTS = "omniforge_events"
CANCEL = "omniforge_cancel"
APPROVALS = "omniforge_approvals"
# Webhook deliveries were stored (or made due again). Payload: empty.
WEBHOOKS = "omniforge_webhooks"
# Schedules were created, changed or deleted: schedulers look again for the next firing.
# Payload: empty.
SCHEDULES = "omniforge_schedules"
CHANNELS = (QUEUE, EVENTS, CANCEL, APPROVALS, WEBHOOKS, SCHEDULES)

MAX_PAYLOAD = 7_900
"""Postgres refuses payloads of 8,000 bytes or more."""

RECONNECT_S = (0.1, 0.25, 0.5, 1.0)
"""Between tries to reconnect for notices; the last repeats (notices missed meanwhile are made
up for: every listener looks again once reconnected)."""

Listener = Callable[[str], None]


def stored_events(payload: str) -> Iterator[tuple[UUID, int | None]]:
    """The tasks an `EVENTS` notice names, each with its last stored event (None: not said)."""
    for item in payload.split(","):
        task, _, seq = item.partition(":")
        try:
            task_id = UUID(task)
        except ValueError:
            continue
        yield task_id, int(seq) if seq.isdigit() else None


def payloads(items: Iterable[str]) -> list[str]:
    """Comma-joined `items` in as few payloads as fit."""
    out: list[str] = []
    current = ""
    for item in items:
        if current and len(current) + 1 + len(item) > MAX_PAYLOAD:
            out.append(current)
            current = ""
        current = f"{current},{item}" if current else item
    if current:
        out.append(current)
    return out


class Notices:
    """This process's end of the notices: `listen` registers a callback per channel (called
    in the event loop, never awaited: it must only hand the payload on), `deliver` hands a
    notice to this process's listeners (what the embedded database does instead of NOTIFY,
    and what arrives from Postgres)."""

    def __init__(self) -> None:
        self._listeners: dict[str, list[Listener]] = {channel: [] for channel in CHANNELS}
        # Called after the connection to Postgres was re-established: notices may have been
        # missed while it was down.
        self.on_reconnect: list[Callable[[], None]] = []
        # Called the moment that connection is lost (the database stopped, or the network
        # between them): the first sign of an outage, before any write fails.
        self.on_lost: list[Callable[[], None]] = []

    def listen(self, channel: str, listener: Listener) -> None:
        self._listeners[channel].append(listener)

    def deliver(self, channel: str, payload: str) -> None:
        for listener in self._listeners.get(channel, ()):
            try:
                listener(payload)
            except Exception:  # one listener's bug must not keep the others from theirs
                logger.exception("a listener of %s failed", channel)

    async def start(self) -> None:
        """Starts receiving notices of other processes (nothing to do in one process)."""

    async def aclose(self) -> None:
        """Stops receiving."""


class PostgresNotices(Notices):
    """Notices of every process on the database, by `LISTEN` on a connection of their own,
    re-established (with every listener told) when it drops."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self._dsn = dsn
        self._connection: Any = None
        self._watch: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()

    async def start(self) -> None:
        await self._connect()
        self._watch = asyncio.create_task(self._keep_connected(), name="notices")

    async def _connect(self) -> None:
        connection = await asyncpg.connect(self._dsn)
        connection.add_termination_listener(self._terminated)
        for channel in CHANNELS:
            await connection.add_listener(channel, self._received)
        self._connection = connection

    def _terminated(self, _connection: Any) -> None:
        self._lost.set()
        if self._watch is not None and not self._watch.done():  # not this process's own close
            for callback in self.on_lost:
                callback()

    def _received(self, _connection: Any, _pid: int, channel: str, payload: object) -> None:
        self.deliver(channel, str(payload))  # a NOTIFY's payload is text

    async def _keep_connected(self) -> None:
        while True:
            await self._lost.wait()
            self._lost.clear()
            for attempt in range(1_000_000):
                delay = RECONNECT_S[min(attempt, len(RECONNECT_S) - 1)]
                await asyncio.sleep(delay)
                try:
                    await self._connect()
                except Exception as exc:
                    if attempt == 0:  # once per outage, not at every try
                        logger.warning("reconnecting for notices failed (%s); retrying", exc)
                    continue
                logger.warning("notices reconnected: reading what may have been missed")
                for callback in self.on_reconnect:
                    callback()
                break

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.wait([self._watch])
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close(timeout=2)


def notices_for(database: Database) -> Notices:
    """Postgres: notices of every instance on the database; SQLite: of this process."""
    if database.is_sqlite:
        return Notices()
    dsn = database.url.set(drivername="postgresql").render_as_string(hide_password=False)
    return PostgresNotices(dsn)
