"""A live run's channel: every subscriber reads every event from its position, woken on
publish; keep-alives while idle; the end once closed. Live deltas come right after the event
they follow, only to those following when they are pushed, from a bounded buffer."""

import asyncio
import json

import pytest

from app.chain import StepType, ToolType, VisibilityLevel
from app.runs import RunChannel, StreamEvent
from app.runs.channel import LiveDelta, StreamItem
from app.security.visibility import StepFacts


def _events(first: int, last: int) -> list[StreamEvent]:
    return [StreamEvent(seq, "task_status", f'{{"n":{seq}}}') for seq in range(first, last + 1)]


async def _read(
    channel: RunChannel, after: int = 0, *, caught_up: asyncio.Event | None = None
) -> list[int]:
    seqs: list[int] = []
    async for event in channel.follow(after):
        assert isinstance(event, StreamEvent)
        seqs.append(event.seq)
        if caught_up is not None and event.seq == channel.last_seq:
            caught_up.set()  # it goes on to wait for more before anyone else runs
    return seqs


async def test_subscribers_get_every_event_after_their_position_then_the_end() -> None:
    channel = RunChannel()
    channel.publish(_events(1, 3))
    caught_up = asyncio.Event()
    early = asyncio.create_task(_read(channel, caught_up=caught_up))
    late = asyncio.create_task(_read(channel, after=4))
    await caught_up.wait()  # `early` has read 1..3 and now waits on the channel
    channel.publish(_events(4, 6))
    channel.close()
    assert await early == [1, 2, 3, 4, 5, 6]
    assert await late == [5, 6]


async def test_an_idle_follower_gets_keepalives_until_something_is_published() -> None:
    channel = RunChannel()
    received: list[StreamEvent | None] = []
    async for item in channel.follow(0, keepalive_s=0.01):
        assert not isinstance(item, LiveDelta)
        received.append(item)
        if len(received) == 3:
            channel.publish(_events(1, 1))
            channel.close()
    assert received[:3] == [None, None, None]
    assert [item.seq for item in received[3:] if item is not None] == [1]


def test_events_must_be_published_in_sequence() -> None:
    channel = RunChannel()
    channel.publish(_events(1, 2))
    with pytest.raises(ValueError, match="event 4 published where 3 was due"):
        channel.publish(_events(4, 4))
    channel.close()
    with pytest.raises(RuntimeError):
        channel.publish(_events(3, 3))


def test_an_event_is_encoded_once_as_an_sse_frame() -> None:
    event = StreamEvent(7, "done", '{"final_state":"completed"}')
    assert event.frame == b'id: 7\nevent: done\ndata: {"final_state":"completed"}\n\n'


def _delta(after: int, text: str = "") -> LiveDelta:
    facts = StepFacts(StepType.TOOL_CALL, ToolType.LLM, "llm", VisibilityLevel.FULL)
    return LiveDelta(after, facts, json.dumps({"delta": text or f"after {after}"}))


def _label(item: StreamItem) -> int | str:
    assert item is not None
    if isinstance(item, StreamEvent):
        return item.seq
    event, data = item.frame.decode().removesuffix("\n\n").split("\n")
    assert event == "event: output_delta"
    return str(json.loads(data.removeprefix("data: "))["delta"])


async def test_a_delta_comes_after_the_event_it_follows_and_before_the_next() -> None:
    channel = RunChannel()
    channel.publish(_events(1, 3))
    follower = channel.follow()
    assert [_label(await anext(follower)) for _ in range(3)] == [1, 2, 3]
    # Pushed before event 4 is stored (the run emitted 4 and 5 already): it waits for them.
    channel.push(_delta(3, "a"))
    channel.push(_delta(5, "b"))
    channel.publish(_events(4, 5))
    channel.push(_delta(5, "c"))
    channel.publish(_events(6, 6))
    channel.close()
    assert [_label(item) async for item in follower] == ["a", 4, 5, "b", "c", 6]


async def test_a_follower_gets_no_delta_pushed_before_it_came_or_before_its_position() -> None:
    channel = RunChannel()
    channel.publish(_events(1, 4))
    channel.push(_delta(4, "before anyone"))
    resumed = channel.follow(after=2)
    assert _label(await anext(resumed)) == 3
    late = channel.follow(after=4)
    channel.push(_delta(4, "live"))
    channel.publish(_events(5, 5))
    channel.close()
    assert [_label(item) async for item in resumed] == [4, "live", 5]
    assert [_label(item) async for item in late] == ["live", 5]


async def test_a_stream_from_the_start_gets_the_deltas_the_buffer_holds() -> None:
    """The client that submits a task subscribes once its run is under way."""
    channel = RunChannel()
    channel.publish(_events(1, 2))
    channel.push(_delta(2, "written"))
    channel.push(_delta(2, "so far"))
    first = channel.follow()
    channel.push(_delta(2, "then"))
    channel.publish(_events(3, 3))
    channel.close()
    assert [_label(item) async for item in first] == [1, 2, "written", "so far", "then", 3]


async def test_a_follower_that_falls_behind_skips_the_deltas_the_buffer_no_longer_holds() -> None:
    channel = RunChannel(delta_buffer=4)
    channel.publish(_events(1, 1))
    slow = channel.follow()
    assert _label(await anext(slow)) == 1
    keeping_up = channel.follow(after=1)
    got: list[int | str] = []
    for n in range(10):
        channel.push(_delta(1, f"d{n}"))
        got.append(_label(await anext(keeping_up)))
    channel.publish(_events(2, 2))
    channel.close()
    assert got == [f"d{n}" for n in range(10)]
    assert [_label(item) async for item in keeping_up] == [2]
    # Suspended all along: it gets the last four, in order, and nothing else is lost.
    assert [_label(item) async for item in slow] == ["d6", "d7", "d8", "d9", 2]


def test_deltas_are_pushed_in_stream_order_and_dropped_once_the_channel_is_closed() -> None:
    channel = RunChannel()
    channel.push(_delta(3))
    with pytest.raises(ValueError, match="a delta after 2 pushed behind one after 3"):
        channel.push(_delta(2))
    channel.close()
    channel.push(_delta(3))  # nobody is left to get it: no error


async def test_a_closed_channel_ends_with_its_events_and_the_deltas_that_follow_them() -> None:
    channel = RunChannel()
    follower = channel.follow()
    channel.publish(_events(1, 2))
    channel.push(_delta(2, "last words"))
    channel.push(_delta(3, "after an event that never came"))
    channel.close()
    assert [_label(item) async for item in follower] == [1, 2, "last words"]


def test_a_delta_is_encoded_once_as_an_sse_frame_without_an_id() -> None:
    delta = _delta(7, "hi")
    assert delta.frame == b'event: output_delta\ndata: {"delta": "hi"}\n\n'


async def test_a_run_ended_after_its_last_stored_event_drops_the_deltas_beyond_it() -> None:
    channel = RunChannel()
    channel.publish(_events(1, 2))
    follower = channel.follow()
    channel.push(_delta(2, "kept"))
    channel.push(_delta(3, "lost"))  # follows an event the run emitted but never stored
    channel.discard_deltas(after=2)
    # The closing events, chain_failed and done, numbered after the last stored one.
    channel.publish(_events(3, 4))
    channel.close()
    assert [_label(item) async for item in follower] == [1, 2, "kept", 3, 4]
