"""A task's stream for one subscriber: what it missed, from the store, then live events and
deltas, as this subscriber may see them."""

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from uuid import UUID

from app.chain import VisibilityLevel
from app.runs.channel import (
    LiveDelta,
    RunChannel,
    StepParts,
    StreamEvent,
    StreamItem,
)
from app.runs.manager import RunManager
from app.runs.recorder import PROGRESS, step_stream_event, stream_event
from app.security.visibility import ReaderView, StepFacts
from app.storage.records import RELAYED
from app.storage.runs import RunStores

REPLAY_PAGE = 500


async def task_stream(
    manager: RunManager,
    stores: RunStores,
    task_id: UUID,
    tenant_id: str,
    chain_id: UUID,
    *,
    after: int,
    keepalive_s: float | None,
    view: ReaderView | None = None,
    family: bool = True,
) -> AsyncIterator[StreamItem]:
    """Every event with `seq > after`, in order, with no gap and no duplicate; `None` for a
    keep-alive. Ends after `done`, or, for a run that is not live here, after what is stored.
    A live run's deltas come too, from the moment of subscribing, each right after the event
    it follows; never those of an LLM call this subscriber sees as `summary` or `hidden`.

    The events of the task's sub-agents (at every depth) come in their place among its own,
    marked with the child's depth and the call step that started it, each seen by this
    reader as it sees that child's own stream; without `family`, the task's own events only
    (the ids keep their numbers).

    With a `view` that lacks full access, each step is sent as that view renders it and hidden
    steps are left out; ids stay the stream's own, so a reconnect resumes where it left off.
    Such a view reads from the start, so that the secrets of earlier steps, and the steps it
    withholds, are known to it.
    """
    gauge = manager.metrics.open_streams
    gauge.inc()
    try:
        viewed = _viewed(
            manager, stores, task_id, tenant_id, chain_id, after, keepalive_s, view, family
        )
        async with contextlib.aclosing(viewed) as events:  # closed at once, with this one
            async for event in events:
                yield event
    finally:
        gauge.dec()


async def _viewed(
    manager: RunManager,
    stores: RunStores,
    task_id: UUID,
    tenant_id: str,
    chain_id: UUID,
    after: int,
    keepalive_s: float | None,
    view: ReaderView | None,
    family: bool,
) -> AsyncGenerator[StreamItem, None]:
    if view is not None and view.full_access:
        view = None
    # Even a view with nothing to redact learns from earlier steps: the tool steps their
    # stored levels withhold, which later prompts may repeat.
    start = 0 if view is not None else after
    events = _events(
        manager, stores, task_id, tenant_id, chain_id, start, keepalive_s, buffered=after == 0
    )
    if not family:
        events = _own(events)
    if view is None:
        async for event in events:
            yield event
        return
    shown: dict[VisibilityLevel, bool] = {}  # by the stored level of a delta's call step
    whole: dict[StepFacts, bool] = {}  # by a call step's facts: whether it is seen whole
    async for event in events:
        if _withheld(view, event, whole):
            # A sub-agent under a call this reader does not see whole: none of it.
            assert isinstance(event, StreamEvent)
            if event.step is not None:
                view.learn(event.step.step, event.step.facts)
            continue
        if isinstance(event, LiveDelta):
            level = event.facts.level
            if level not in shown:
                shown[level] = view.level(event.facts) is VisibilityLevel.FULL
            # A value this reader has masked may recur in the model's raw text, possibly split
            # across deltas: such a reader gets the completed, masked step only.
            if shown[level] and event.after >= after and not view.masks_values:
                yield event
            continue
        if event is not None and event.progress is not None:
            if event.seq > after and (shown_progress := _progress(view, event)) is not None:
                yield shown_progress
            continue
        if event is None or event.step is None:
            if event is None or event.seq > after:
                yield event
            continue
        parts = event.step
        if event.seq <= after:
            view.learn(parts.step, parts.facts)
            continue
        rendered = view.render(parts.step, parts.facts)
        if rendered is None:
            continue
        if rendered is parts.step:
            yield event
        else:
            yield step_stream_event(event.seq, _with_step(parts, rendered))


def _withheld(view: ReaderView, event: StreamItem, whole: dict[StepFacts, bool]) -> bool:
    """Whether `event` is a sub-agent's under a call this reader does not see whole (each
    call's verdict kept in `whole`)."""
    if not isinstance(event, StreamEvent) or event.relay is None:
        return False
    for call in event.relay.calls:
        if call not in whole:
            whole[call] = view.level(call) is VisibilityLevel.FULL
        if not whole[call]:
            return True
    return False


async def _own(events: AsyncIterator[StreamItem]) -> AsyncIterator[StreamItem]:
    """The task's own events, without its sub-agents'."""
    async for event in events:
        if not isinstance(event, StreamEvent) or event.relay is None:
            yield event


def _progress(view: ReaderView, event: StreamEvent) -> StreamEvent | None:
    """A `tool_progress` event as this reader sees its call: not at all where the call is
    hidden from it, without its message where only a summary is shown, its message masked as
    the reader's steps are. An approval's event likewise, its arguments as the call's."""
    assert event.progress is not None
    level = view.level(event.progress)
    if level is VisibilityLevel.HIDDEN:
        return None
    data = json.loads(event.data)
    name = "message" if event.type == PROGRESS else "arguments"
    shown = value = data.get(name)
    if name == "arguments":
        if isinstance(value, dict):
            shown = view.arguments(value, event.progress)
    elif level is VisibilityLevel.SUMMARY:
        shown = None
    elif isinstance(value, str):
        shown = view.masked(value)
    if shown == value:
        return event
    data[name] = shown
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return StreamEvent(event.seq, event.type, text, progress=event.progress, relay=event.relay)


def _with_step(parts: StepParts, step: str) -> StepParts:
    return replace(parts, step=step)


async def _events(
    manager: RunManager,
    stores: RunStores,
    task_id: UUID,
    tenant_id: str,
    chain_id: UUID,
    after: int,
    keepalive_s: float | None,
    *,
    buffered: bool,
) -> AsyncIterator[StreamItem]:
    """Every event after `after` through `done`, wherever the run is. A run live here is
    followed on its channel, which holds every event it has published and publishes only
    what is stored (a resumed run's channel starts where its predecessor stopped: the store
    has what came before). Any other run (queued, owned by another instance, between two
    instances) is read from the store: what is stored now by this subscriber itself, then
    what comes on the task's feed, which this process reads once for all its subscribers at
    each notice that more of it is stored (`StoredFeeds`), until `done`; its deltas are not
    seen here (they are never stored)."""
    while True:
        channel = _live(manager, task_id, after)
        if channel is not None:
            async for event in channel.follow(after, keepalive_s=keepalive_s, buffered=buffered):
                yield event
                if event is not None and not isinstance(event, LiveDelta):
                    after = event.seq
                    if _ends(event):
                        return
            continue  # the run was handed over: read on from the store
        live = manager.channel(task_id)
        until = None if live is None or live.closed else live.first_seq - 1
        async for event in _stored(stores, task_id, tenant_id, chain_id, after, until):
            yield event
            after = event.seq
            if _ends(event):
                return
        if until is not None:
            continue  # caught up with the run live here
        with manager.feeds.joined(tenant_id, task_id, chain_id, after) as feed:
            start = feed.channel.first_seq - 1
            if start > after:  # the feed began later than this subscriber is
                async for event in _stored(stores, task_id, tenant_id, chain_id, after, start):
                    yield event
                    after = event.seq
                    if _ends(event):
                        return
            async for event in feed.channel.follow(after, keepalive_s=keepalive_s):
                if event is None:
                    yield event
                    continue
                assert isinstance(event, StreamEvent)
                after = event.seq
                if event.type == RELAYED:
                    continue  # its child's event is gone (erased): nothing to send
                yield event
                if _ends(event):
                    return
                if manager.channel(task_id) is not None:
                    break  # a run of it became live here: follow that
            else:
                if feed.finished:
                    return  # finished, and everything stored was read


def _live(manager: RunManager, task_id: UUID, after: int) -> RunChannel | None:
    """The run's channel, if it is live here and its channel holds what comes after `after`."""
    channel = manager.channel(task_id)
    if channel is None or channel.closed or channel.first_seq > after + 1:
        return None
    return channel


async def _stored(
    stores: RunStores,
    task_id: UUID,
    tenant_id: str,
    chain_id: UUID,
    after: int,
    until: int | None,
) -> AsyncIterator[StreamEvent]:
    """What is stored now after `after` (through `until`, if given), page by page."""
    while until is None or after < until:
        page = await stores.streams.replay(
            tenant_id, task_id, chain_id, after=after, limit=REPLAY_PAGE
        )
        for item in page:
            event = stream_event(task_id, chain_id, item)
            after = event.seq
            if event.type != RELAYED:  # else its child's event is gone (erased)
                yield event
            if until is not None and after >= until:
                return
        if len(page) < REPLAY_PAGE:
            return


def _ends(event: StreamEvent) -> bool:
    """The task's own `done` (its sub-agents' never enter its stream)."""
    return event.type == DONE and event.relay is None


DONE = "done"
