"""Tools' progress reports: `tool_progress` events of the task's stream, stored and numbered like
every event, between the call's step and its result, each reader seeing them as it sees the
call."""

from typing import Any

from tests.api.helpers import configure, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


def _script(service: Service, n: int) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("countdown", {"n": n}, id="c1")]),
        Reply.text("Done counting."),
    )


async def _run(service: Service, tenant: str, n: int) -> tuple[dict[str, Any], list[Any]]:
    await configure(service, tenant, "tools", {"enabled_tools": ["countdown"]})
    _script(service, n)
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Count down from 3.")
        events = await stream(client, accepted["task_id"])
    return accepted, events


async def test_progress_reports_stream_in_order_between_the_call_and_its_result(
    service: Service, tenant: str
) -> None:
    accepted, events = await _run(service, tenant, 3)
    kinds = [(e.event, e.json.get("step", {}).get("type")) for e in events]
    call = kinds.index(("reasoning_step", "tool_call"), 2)  # after the LLM call's steps
    while events[call].json["step"]["tool_call"]["tool_name"] != "countdown":
        call = kinds.index(("reasoning_step", "tool_call"), call + 1)
    progress = [e for e in events if e.event == "tool_progress"]
    assert [p.json["message"] for p in progress] == ["2 left", "1 left", "0 left"]
    assert [p.json["fraction"] for p in progress] == [1 / 3, 2 / 3, 1.0]
    call_step = events[call].json["step"]
    assert {p.json["step_id"] for p in progress} == {call_step["id"]}
    assert all(p.json["tool_name"] == "countdown" for p in progress)
    positions = [events.index(p) for p in progress]
    assert positions == list(range(call + 1, call + 4))
    result = events[call + 4].json["step"]
    assert result["type"] == "tool_result"
    assert result["tool_result"]["correlation_id"] == call_step["tool_call"]["correlation_id"]
    ids = [e.id for e in events]
    assert ids == list(range(1, len(events) + 1))  # numbered like every event, no gap

    # Stored: a stream opened after the run replays them with the same ids, and a resume
    # from the first report gets the rest.
    async with service.client(tenant) as client:
        again = await stream(client, accepted["task_id"])
        after_first = {"Last-Event-ID": str(ids[call + 1])}
        resumed = await stream(client, accepted["task_id"], headers=after_first)
    assert [(e.id, e.event, e.json) for e in again] == [(e.id, e.event, e.json) for e in events]
    assert [e.id for e in resumed] == ids[call + 2 :]
    assert [e.json["message"] for e in resumed if e.event == "tool_progress"] == [
        "1 left",
        "0 left",
    ]


async def test_a_reader_sees_progress_as_it_sees_the_call(service: Service, tenant: str) -> None:
    accepted, _ = await _run(service, tenant, 2)
    await configure(
        service,
        tenant,
        "visibility",
        {"roles": {"viewer": {"tools": {"countdown": "summary"}}, "member": {"tools": {}}}},
    )
    async with service.client(tenant, sub="vic", roles=("viewer",)) as viewer:
        summarised = await stream(viewer, accepted["task_id"])
    progress = [e.json for e in summarised if e.event == "tool_progress"]
    assert [(p["message"], p["fraction"]) for p in progress] == [(None, 0.5), (None, 1.0)]

    await configure(service, tenant, "visibility", {"tools": {"countdown": "hidden"}})
    async with service.client(tenant, sub="vic", roles=("viewer",)) as viewer:
        hidden = await stream(viewer, accepted["task_id"])
    assert not [e for e in hidden if e.event == "tool_progress"]
    assert hidden[-1].event == "done"
    async with service.client(tenant, sub="aud", roles=("auditor",)) as auditor:
        full = await stream(auditor, accepted["task_id"])
    assert [e.json["message"] for e in full if e.event == "tool_progress"] == ["1 left", "0 left"]
