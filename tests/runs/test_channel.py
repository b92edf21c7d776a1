"""A live run's channel: every subscriber reads every event from its position, woken on
publish; keep-alives while idle; the end once closed."""

import asyncio

import pytest

from app.runs import RunChannel, StreamEvent


def _events(first: int, last: int) -> list[StreamEvent]:
    return [StreamEvent(seq, "task_status", f'{{"n":{seq}}}') for seq in range(first, last + 1)]


async def _read(
    channel: RunChannel, after: int = 0, *, caught_up: asyncio.Event | None = None
) -> list[int]:
    seqs: list[int] = []
    async for event in channel.follow(after):
        assert event is not None
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
