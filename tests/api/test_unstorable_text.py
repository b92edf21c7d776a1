"""A model's reply or a tool's result may hold text no database stores (U+0000, lone
surrogates): it is stored, streamed and replayed with the documented stand-ins, and the task
finishes like any other, on Postgres and SQLite alike."""

import asyncio
import re
from collections.abc import Iterator
from typing import Any

from app.storage.text import NUL_STAND_IN, SURROGATE_STAND_IN
from tests.api.helpers import configure, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import collect

STALLED_S = 60
THINKING = "Let me add\x00 these \ud800up."
ANSWER = "The sum is 4\x00, and that is \udfffall."


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _stored(text: str) -> str:
    return (
        text.replace("\x00", NUL_STAND_IN)
        .replace("\ud800", SURROGATE_STAND_IN)
        .replace("\udfff", SURROGATE_STAND_IN)
    )


async def test_a_reply_with_nul_and_lone_surrogates_is_stored_and_the_task_finishes(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "quotas", {"concurrent_runs": 1})
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "2 + 2\x00"}, id="c1")], content=THINKING
        ),
        Reply.text(ANSWER),
        Reply.text("again"),
    )
    # A task left unfinished leaves its stream open: fail then, rather than hang.
    async with asyncio.timeout(STALLED_S), service.client(tenant) as client:
        accepted = await submit(client, input="What is 2 + 2?")
        task_id = accepted["task_id"]
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            live = await collect(response)
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        chain = (await client.get(f"/api/v1/tasks/{task_id}/chain")).json()
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            replay = await collect(response)
        after_the_end = await client.get(
            f"/api/v1/tasks/{task_id}/events", headers={"Last-Event-ID": str(live[-1].id)}
        )
        # The tenant's one concurrent run is free again.
        second = await submit(client, input="And again?")
        async with client.stream("GET", f"/api/v1/tasks/{second['task_id']}/events") as r:
            second_events = await collect(r)

    assert [e.event for e in live][-2:] == ["chain_completed", "done"]
    assert live[-1].json["final_state"] == "completed"
    assert [e.id for e in live] == list(range(1, len(live) + 1))
    assert task["status"] == "completed"
    assert task["result"] == _stored(ANSWER)
    assert live[-2].json["answer"] == _stored(ANSWER)
    # Stored as streamed: a replay is the live stream.
    assert [(e.id, e.event, e.json) for e in replay] == [(e.id, e.event, e.json) for e in live]
    assert after_the_end.status_code == 204
    streamed_steps = [e.json["step"] for e in live if e.event == "reasoning_step"]
    assert chain["steps"] == streamed_steps
    texts = [text for event in live for text in _strings(event.json)]
    assert not any(_UNSTORABLE.search(text) for text in texts)
    assert any(NUL_STAND_IN in text for text in texts)
    assert any(SURROGATE_STAND_IN in text for text in texts)
    calculator_call = next(
        s
        for s in streamed_steps
        if s["type"] == "tool_call" and s["tool_call"]["tool_name"] == "calculator"
    )
    assert calculator_call["tool_call"]["arguments"] == {"expression": f"2 + 2{NUL_STAND_IN}"}
    assert second_events[-1].json["final_state"] == "completed"
