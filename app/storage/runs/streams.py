"""The read side of a task's stream: its stored events and steps after a position, in order,
with the events of its sub-agents that are relayed into it; and a chain's stored steps, which a
resumed run replays."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import Text, and_, cast, null, or_, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.records import RELAYED, StoredEvent, StoredRelay, StoredStep
from app.storage.runs.announce import RunStore
from app.storage.tables import reasoning_steps, task_events

_s, _e = reasoning_steps.c, task_events.c
# What a stored step and a stored event are read as, side by side in one union: the event's
# type is null for a step; the step's columns are null for an event.
_STEP_COLUMNS = (
    _s.seq,
    null().label("event_type"),
    cast(_s.data, Text).label("data"),
    _s.timestamp,
    cast(_s.metrics, Text).label("metrics"),
    _s.type,
    _s.tool_type,
    _s.tool_name,
    _s.visibility,
)
_EVENT_COLUMNS = (_e.seq, _e.type, cast(_e.data, Text), *(null() for _ in range(6)))


@dataclass(frozen=True, slots=True)
class StreamRead:
    """A stream to read on from: its task, chain and tenant, and the last event it has."""

    tenant_id: str
    task_id: UUID
    chain_id: UUID
    after: int


class StreamReads(RunStore):
    """Reads of stored streams and chains, for the instance that serves or resumes them."""

    async def chain_steps(self, chain_id: UUID) -> list[str]:
        """A chain's stored steps (their JSON), in order: what a resumed run replays."""
        s = reasoning_steps.c
        statement = select(cast(s.data, Text)).where(s.chain_id == chain_id).order_by(s.step_number)
        async with self.database.read() as connection:
            return list((await connection.scalars(statement)).all())

    async def replay(
        self, tenant_id: str, task_id: UUID, chain_id: UUID, *, after: int, limit: int
    ) -> list[StoredEvent | StoredStep | StoredRelay]:
        """Stored events of a task's stream with `seq > after`, in order, at most `limit`;
        the caller's tenant scopes the read. Its sub-agents' events relayed into it come with
        the child's event or step they point to."""
        e, s = task_events.c, reasoning_steps.c
        # One statement, so one snapshot: two reads could see a later write between them,
        # and a step stored after events not yet seen would open a gap.
        steps = select(*_STEP_COLUMNS).where(
            s.tenant_id == tenant_id, s.chain_id == chain_id, s.seq > after
        )
        events = select(*_EVENT_COLUMNS).where(
            e.tenant_id == tenant_id, e.task_id == task_id, e.seq > after
        )
        both = union_all(steps, events).subquery()
        query = select(both).order_by(both.c.seq).limit(limit)
        async with self.database.read() as connection:
            rows = (await connection.execute(query)).all()
            page: list[StoredEvent | StoredStep | StoredRelay] = [
                StoredEvent(seq=row[0], type=row[1], data=row[2])
                if row[1] is not None
                else _stored_step(row[0], row[2:])
                for row in rows
            ]
            relays = [item for item in page if _is_relay(item)]
            if not relays:
                return page
            # A relay is stored after (or with) the event it points to: a second read sees it.
            resolved = await _relayed(connection, tenant_id, relays)
        # One whose event is gone (its child erased) stays a bare `RELAYED` event, counted in
        # the page's length so that a full page still says more may follow.
        return [resolved.get(item.seq, item) if _is_relay(item) else item for item in page]

    async def replay_many(
        self, reads: Sequence[StreamRead], *, limit: int
    ) -> tuple[dict[UUID, list[StoredEvent | StoredStep | StoredRelay]], bool]:
        """`replay` of many streams in one statement (one snapshot): each task's stored
        events after its `after`, in order. At most `limit` in all, ordered by seq, so each
        task gets a gap-free beginning of what it has; the second value says whether the
        page was full (then any of them may have more)."""
        if not reads:
            return {}, False
        e, s = task_events.c, reasoning_steps.c
        task_of = {read.chain_id: read.task_id for read in reads}
        steps = select(s.chain_id.label("key"), *_STEP_COLUMNS).where(
            or_(
                *(
                    and_(s.tenant_id == r.tenant_id, s.chain_id == r.chain_id, s.seq > r.after)
                    for r in reads
                )
            )
        )
        events = select(e.task_id, *_EVENT_COLUMNS).where(
            or_(
                *(
                    and_(e.tenant_id == r.tenant_id, e.task_id == r.task_id, e.seq > r.after)
                    for r in reads
                )
            )
        )
        both = union_all(steps, events).subquery()
        query = select(both).order_by(both.c.seq).limit(limit)
        tenant_of = {read.task_id: read.tenant_id for read in reads}
        pages: dict[UUID, list[StoredEvent | StoredStep | StoredRelay]] = {}
        async with self.database.read() as connection:
            rows = (await connection.execute(query)).all()
            for row in rows:
                key: UUID = row[0]
                task_id = task_of.get(key, key)
                item = (
                    StoredEvent(seq=row[1], type=row[2], data=row[3])
                    if row[2] is not None
                    else _stored_step(row[1], row[3:])
                )
                pages.setdefault(task_id, []).append(item)
            for task_id, page in pages.items():
                relays = [item for item in page if _is_relay(item)]
                if relays:
                    resolved = await _relayed(connection, tenant_of[task_id], relays)
                    pages[task_id] = [
                        resolved.get(item.seq, item) if _is_relay(item) else item for item in page
                    ]
        return pages, len(rows) == limit


def _stored_step(seq: int, columns: Sequence[Any]) -> StoredStep:
    """A stored step from its row's data, timestamp, metrics and fact columns."""
    data, timestamp, metrics, step_type, tool_type, tool_name, visibility = columns
    return StoredStep(
        seq=seq,
        timestamp=timestamp,
        step=data,
        metrics=metrics,
        type=step_type,
        tool_type=tool_type,
        tool_name=tool_name,
        visibility=visibility,
    )


def _is_relay(item: StoredEvent | StoredStep | StoredRelay) -> bool:
    return isinstance(item, StoredEvent) and item.type == RELAYED


async def _relayed(
    connection: AsyncConnection,
    tenant_id: str,
    relays: Sequence[StoredEvent | StoredStep | StoredRelay],
) -> dict[int, StoredRelay]:
    """The children's events and steps that `relays` point to, by the relay's seq."""
    pointers = {
        relay.seq: json.loads(relay.data) for relay in relays if isinstance(relay, StoredEvent)
    }
    steps_at = {(UUID(p["chain_id"]), p["seq"]) for p in pointers.values()}
    events_at = {(UUID(p["task_id"]), p["seq"]) for p in pointers.values()}
    e, s = task_events.c, reasoning_steps.c
    step_rows = await connection.execute(
        select(
            s.chain_id,
            s.seq,
            cast(s.data, Text),
            s.timestamp,
            cast(s.metrics, Text),
            s.type,
            s.tool_type,
            s.tool_name,
            s.visibility,
        ).where(s.tenant_id == tenant_id, tuple_(s.chain_id, s.seq).in_(steps_at))
    )
    found: dict[tuple[UUID, int], StoredEvent | StoredStep] = {
        (row[0], row[1]): _stored_step(row[1], row[2:]) for row in step_rows
    }
    event_rows = await connection.execute(
        select(e.task_id, e.seq, e.type, cast(e.data, Text)).where(
            e.tenant_id == tenant_id, tuple_(e.task_id, e.seq).in_(events_at)
        )
    )
    events = {
        (row[0], row[1]): StoredEvent(seq=row[1], type=row[2], data=row[3]) for row in event_rows
    }
    resolved: dict[int, StoredRelay] = {}
    for seq, pointer in pointers.items():
        task_id, chain_id = UUID(pointer["task_id"]), UUID(pointer["chain_id"])
        event = found.get((chain_id, pointer["seq"])) or events.get((task_id, pointer["seq"]))
        if event is None:
            continue
        parent_step = pointer.get("parent_step_id")
        resolved[seq] = StoredRelay(
            seq=seq,
            task_id=task_id,
            chain_id=chain_id,
            depth=pointer["depth"],
            parent_step_id=None if parent_step is None else UUID(parent_step),
            calls=[tuple(call) for call in pointer.get("calls", ())],
            event=event,
        )
    return resolved
