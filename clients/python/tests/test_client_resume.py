"""A stream whose connection drops mid-way resumes by itself from the last event received:
a proxy between client and service cuts the first connection after some stored events, and
the client's events are exactly the service's whole stream."""

import asyncio

import pytest
from cutting_proxy import CuttingProxy
from omniforge_client import AsyncOmniForge, OmniForge, StreamInterrupted
from omniforge_client.events import DoneEvent, ReasoningStepEvent, StreamEvent

from tests.api.helpers import stream
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

CUT_AFTER = 3  # chain_started, task_status, the first step: the run is then held by a gate


def _script(service: Service, gate: asyncio.Event) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"}, id="c1")], gate=gate),
        Reply.text("6 * 7 = 42."),
    )


async def _open_gate_after_cut(proxy: CuttingProxy, gate: asyncio.Event) -> None:
    await proxy.cut.wait()
    gate.set()


async def _served(service: Service, tenant: str, task_id: str) -> list[tuple[int | None, str]]:
    async with service.client(tenant) as direct:
        events = await stream(direct, task_id)
    return [(event.id, event.event) for event in events]


def _seen(events: list[StreamEvent]) -> list[tuple[int | None, str]]:
    return [(event.event_id, event.type) for event in events]


@pytest.mark.parametrize("mid_frame", [False, True], ids=["between-events", "inside-an-event"])
@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
async def test_a_dropped_stream_resumes_from_the_last_event_without_gap_or_duplicate(
    service: Service, tenant: str, blocking: bool, mid_frame: bool
) -> None:
    gate = asyncio.Event()
    _script(service, gate)
    token = service.token(tenant)
    cut = CuttingProxy(service.base_url, cut_after=CUT_AFTER, mid_frame=mid_frame)
    async with cut as proxy:
        async with AsyncOmniForge(service.base_url, token=token) as direct:
            accepted = await direct.tasks.create("What is 6 * 7?")
        opener = asyncio.ensure_future(_open_gate_after_cut(proxy, gate))
        if blocking:

            def follow() -> list[StreamEvent]:
                with OmniForge(proxy.url, token=token, stream_backoff_s=0.01) as client:
                    return list(client.tasks.stream(accepted.task_id))

            events = await asyncio.to_thread(follow)
        else:
            async with AsyncOmniForge(proxy.url, token=token, stream_backoff_s=0.01) as client:
                events = [event async for event in client.tasks.stream(accepted.task_id)]
        await opener

    served = await _served(service, tenant, str(accepted.task_id))
    assert _seen(events) == served
    assert [event_id for event_id, _ in served] == list(range(1, len(served) + 1))
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].final_state == "completed"
    assert len(served) > CUT_AFTER + 1  # the cut came mid-stream, before the run went on
    # A half-received event is dropped, and asked for again.
    assert proxy.last_event_ids() == [None, str(CUT_AFTER - 1 if mid_frame else CUT_AFTER)]
    steps = [e.step.step_number for e in events if isinstance(e, ReasoningStepEvent)]
    assert steps == list(range(1, len(steps) + 1))


async def test_a_stream_resumes_after_a_given_event_id(service: Service, tenant: str) -> None:
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with AsyncOmniForge(service.base_url, token=service.token(tenant)) as client:
        accepted = await client.tasks.create("Quick one")
        everything = [event async for event in client.tasks.stream(accepted.task_id)]
        rest = [event async for event in client.tasks.stream(accepted.task_id, after=2)]
        nothing = [
            event async for event in client.tasks.stream(accepted.task_id, after=len(everything))
        ]

    assert _seen(rest) == _seen(everything)[2:]
    assert nothing == []  # finished, nothing after the last event: the service answers 204


async def test_a_stream_that_keeps_dropping_gives_up_after_its_retries(
    service: Service, tenant: str
) -> None:
    gate = asyncio.Event()
    _script(service, gate)
    token = service.token(tenant)
    async with AsyncOmniForge(service.base_url, token=token) as direct:
        accepted = await direct.tasks.create("What is 6 * 7?")
        # Nothing listens on this port any more: every reconnect is refused.
        async with CuttingProxy(service.base_url, cut_after=CUT_AFTER) as proxy:
            url = proxy.url
        async with AsyncOmniForge(url, token=token, stream_retries=2, stream_backoff_s=0.01) as c:
            with pytest.raises(StreamInterrupted) as caught:
                [event async for event in c.tasks.stream(accepted.task_id, after=1)]
        gate.set()
        await direct.tasks.wait(accepted.task_id)

    assert caught.value.last_event_id == 1
