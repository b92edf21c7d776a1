"""Live output over a real uvicorn: with `stream_output`, each LLM call's reply streams as
`output_delta` events between the call's step and the step that completes it; deltas carry no
id, are never stored or replayed, and reach only readers who see the LLM's steps whole."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from tests.api.helpers import configure, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import SSE, collect, read_sse

FIRST_WORDS = "Let me work that out with the calculator. "
ANSWER = "17 * 23 + 4 = 395, as the calculator says."
REASONING = "The calculator returned 395 for 17 * 23 + 4, so that is the answer. "


@dataclass(frozen=True)
class LLMCall:
    """One LLM call as a stream shows it: where its two steps are, what its result holds."""

    step_id: str
    correlation_id: str
    call_at: int  # positions in the list of events
    result_at: int
    value: dict[str, Any]


def _llm_calls(events: list[SSE]) -> list[LLMCall]:
    opened: dict[str, tuple[str, int]] = {}
    calls = []
    for at, event in enumerate(events):
        if event.event != "reasoning_step":
            continue
        step = event.json["step"]
        call, result = step.get("tool_call"), step.get("tool_result")
        if call is not None and call["tool_name"] == "llm":
            opened[call["correlation_id"]] = (step["id"], at)
        elif result is not None and result["correlation_id"] in opened:
            step_id, call_at = opened.pop(result["correlation_id"])
            calls.append(LLMCall(step_id, result["correlation_id"], call_at, at, result["result"]))
    return calls


def _deltas(events: list[SSE]) -> list[tuple[int, dict[str, Any]]]:
    return [(at, e.json) for at, e in enumerate(events) if e.event == "output_delta"]


def _text(deltas: list[tuple[int, dict[str, Any]]], call: LLMCall, kind: str) -> str:
    return "".join(
        d["delta"] for _, d in deltas if d["step_id"] == call.step_id and d["kind"] == kind
    )


@contextlib.asynccontextmanager
async def _following(
    client: httpx.AsyncClient, task_id: str, **headers: str
) -> AsyncIterator[AsyncIterator[SSE]]:
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events", headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        yield read_sse(r)


async def _until(events: AsyncIterator[SSE], seen: list[SSE], done: Any) -> None:
    """Reads into `seen` until an event for which `done` is true."""
    async for event in events:
        seen.append(event)
        if done(event):
            return
    raise AssertionError(f"the stream ended first: {[e.event for e in seen]}")


def _is_llm_call(event: SSE) -> bool:
    if event.event != "reasoning_step":
        return False
    call = event.json["step"].get("tool_call")
    return call is not None and call["tool_name"] == "llm"


def _levels(events: list[SSE]) -> list[str]:
    return [e.json["step"]["visibility"]["level"] for e in events if e.event == "reasoning_step"]


async def test_each_llm_calls_reply_streams_between_its_call_step_and_the_step_completing_it(
    service: Service, tenant: str
) -> None:
    first_reply = asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            content=FIRST_WORDS,
            gate=first_reply,
        ),
        Reply.text(ANSWER, reasoning=REASONING),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, stream_output=True)
        task_id = accepted["task_id"]
        async with _following(client, task_id) as live:
            events: list[SSE] = []
            await _until(live, events, lambda e: e.event == "task_status")
            first_reply.set()  # the model answers once this subscriber follows the run
            events += [event async for event in live]
        replay = await stream(client, task_id)

    stored = [event for event in events if event.event != "output_delta"]
    assert [event.id for event in stored] == list(range(1, len(stored) + 1))
    assert stored[-1].event == "done"
    assert stored[-1].json["final_state"] == "completed"
    deltas = _deltas(events)
    assert all(events[at].id is None for at, _ in deltas)
    calls = _llm_calls(events)
    assert len(calls) == 2
    for call in calls:
        mine = [(at, d) for at, d in deltas if d["step_id"] == call.step_id]
        assert len(mine) > 1
        assert all(call.call_at < at < call.result_at for at, _ in mine)
        for _, delta in mine:
            assert delta["type"] == "output_delta"
            assert delta["task_id"] == task_id
            assert delta["chain_id"] == accepted["chain_id"]
            assert delta["correlation_id"] == call.correlation_id
            assert delta["attempt"] == 1
            assert delta["timestamp"]
    assert {d["step_id"] for _, d in deltas} == {call.step_id for call in calls}
    asked, answered = calls
    assert _text(deltas, asked, "content") == asked.value["content"] == FIRST_WORDS
    assert _text(deltas, answered, "content") == answered.value["content"] == ANSWER
    # Reasoning streamed apart from the answer, first, and kept whole in the completed step.
    assert _text(deltas, answered, "reasoning") == answered.value["reasoning"] == REASONING
    kinds = [d["kind"] for _, d in deltas if d["step_id"] == answered.step_id]
    assert kinds == sorted(kinds, key=["reasoning", "content"].index)
    assert all(request.body["stream"] is True for request in service.fake_llm.requests)
    # Deltas are live only: the stream replayed after the end is the stored events, as sent.
    assert [(e.id, e.event, e.json) for e in replay] == [(e.id, e.event, e.json) for e in stored]


async def test_a_client_resuming_with_last_event_id_gets_exactly_the_missed_stored_events(
    service: Service, tenant: str
) -> None:
    first_reply, answer = asyncio.Event(), asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            content=FIRST_WORDS,
            gate=first_reply,
        ),
        Reply.text(ANSWER, gate=answer),
    )
    async with service.client(tenant) as client:
        task_id = (await submit(client, stream_output=True))["task_id"]
        first: list[SSE] = []
        async with _following(client, task_id) as live:
            await _until(live, first, _is_llm_call)
        # With nobody following, the first reply streams and the run goes on to ask again.
        first_reply.set()
        await service.fake_llm.wait_for_requests(2, MODEL)
        resumed: list[SSE] = []
        async with _following(client, task_id, **{"Last-Event-ID": str(first[-1].id)}) as live:
            await _until(live, resumed, _is_llm_call)
            answer.set()
            resumed += [event async for event in live]
        replay = await stream(client, task_id)

    assert all(event.event != "output_delta" for event in first)
    stored = [event for event in resumed if event.event != "output_delta"]
    last_seen = first[-1].id
    assert last_seen is not None
    missed = [event for event in replay if event.id is not None and event.id > last_seen]
    assert [(e.id, e.event, e.json) for e in stored] == [(e.id, e.event, e.json) for e in missed]
    assert stored[-1].event == "done"
    # The first reply's deltas came before this client did: none of them, only the answer's.
    _, answered = _llm_calls(replay)
    deltas = _deltas(resumed)
    assert {d["step_id"] for _, d in deltas} == {answered.step_id}
    assert _text(deltas, answered, "content") == ANSWER
    assert all(request.body["stream"] is True for request in service.fake_llm.requests)


VISIBILITY = {
    "tool_types": {"llm": "hidden"},
    "roles": {"viewer": {"tools": {"llm": "summary"}}, "reviewer": {"tools": {"llm": "full"}}},
}


async def test_deltas_reach_only_readers_who_see_the_llm_steps_whole(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "visibility", VISIBILITY)
    answer = asyncio.Event()
    service.fake_llm.script(MODEL, Reply.text(ANSWER, gate=answer))
    readers = {
        "member": ("member",),  # llm steps hidden
        "viewer": ("viewer",),  # as summaries
        "reviewer": ("member", "reviewer"),  # whole, by a role rule, though filtered
        "admin": ("tenant_admin",),  # everything as it is
    }
    async with contextlib.AsyncExitStack() as stack:
        author = await stack.enter_async_context(service.client(tenant))
        task_id = (await submit(author, stream_output=True))["task_id"]
        streams: dict[str, tuple[AsyncIterator[SSE], list[SSE]]] = {}
        for name, roles in readers.items():
            client = await stack.enter_async_context(service.client(tenant, sub=name, roles=roles))
            live = await stack.enter_async_context(_following(client, task_id))
            seen: list[SSE] = []
            await _until(live, seen, lambda e: e.event == "task_status")
            streams[name] = (live, seen)
        answer.set()
        events = {}
        for name, (live, seen) in streams.items():
            events[name] = seen + [event async for event in live]

    for name, got in events.items():
        assert got[-1].event == "done", name
    assert _deltas(events["member"]) == _deltas(events["viewer"]) == []
    # The call and its result: left out for the member, summarised for the viewer.
    assert _levels(events["member"]) == ["full"]
    assert _levels(events["viewer"]) == ["summary", "summary", "full"]
    for name in ("reviewer", "admin"):
        [call] = _llm_calls(events[name])
        deltas = _deltas(events[name])
        assert all(call.call_at < at < call.result_at for at, _ in deltas), name
        assert _text(deltas, call, "content") == ANSWER, name


async def test_without_stream_output_no_streaming_request_is_made(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")]),
        Reply.text(ANSWER),
    )
    async with service.client(tenant) as client:
        first = await stream(client, (await submit(client))["task_id"])
        service.fake_llm.script(MODEL, Reply.text(ANSWER))
        async with client.stream(
            "POST",
            "/api/v1/tasks",
            json={"input": "again, as a stream", "stream_output": False},
            headers={"Accept": "text/event-stream"},
        ) as response:
            second = await collect(response)

    assert first[-1].event == second[-1].event == "done"
    assert [e for e in first + second if e.event == "output_delta"] == []
    requests = service.fake_llm.requests
    assert len(requests) == 3
    assert all(not request.body.get("stream") for request in requests)
