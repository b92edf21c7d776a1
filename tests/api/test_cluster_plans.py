"""A plan survives its instance: killed mid-wave, its run is resumed by another instance from
its stored steps, wave by wave — the finished steps' calls answered from the store, not made
or billed again, the call whose result was lost made once more."""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.api.helpers import stream, submit
from tests.api.test_cluster import FAST_LEASE, assert_whole
from tests.cluster import cluster
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import MODEL
from tests.sse import read_sse

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)

PLAN = {
    "steps": [
        {"id": "a1", "description": "first of a", "strategy": "direct"},
        {"id": "b1", "description": "first of b", "strategy": "direct"},
        {"id": "a2", "description": "second of a", "strategy": "direct", "depends_on": ["a1"]},
        {"id": "b2", "description": "second of b", "strategy": "direct", "depends_on": ["b1"]},
        {
            "id": "join",
            "description": "join a and b",
            "strategy": "direct",
            "depends_on": ["a2", "b2"],
        },
    ]
}


def _requests_per_step(fake_llm: FakeLLMServer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for request in fake_llm.requests_for(MODEL):
        text = request.body["messages"][-1]["content"]
        if "This step: " in text:
            step = text.split("This step: ")[1].split("\n")[0]
            counts[step] = counts.get(step, 0) + 1
    return counts


async def _until_stored(client: Any, task_id: str, step: str) -> None:
    """Follows the task's stream until the result of `step`'s call is in it (stored: a
    stream shows only what its run stored)."""
    started: list[str] = []  # the steps of the wave whose calls come next
    calls: dict[str, str] = {}  # call correlation id -> plan step
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        async for event in read_sse(response):
            if event.event != "reasoning_step":
                continue
            record = event.json["step"]
            thinking = record.get("thinking") or {}
            if thinking.get("event") == "plan_step_started":
                started.append(thinking["detail"]["step"])
            elif record["type"] == "tool_call" and started:
                calls[record["tool_call"]["correlation_id"]] = started.pop(0)
            elif (
                record["type"] == "tool_result"
                and calls.get(record["tool_result"]["correlation_id"]) == step
            ):
                return


async def test_a_plan_killed_mid_wave_resumes_on_another_instance_without_repeating_a_step(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """Instance a runs the plan's first wave and, of its second, has `second of a` answered
    and stored while `second of b` is held; a is killed. Instance b resumes the run: the plan
    and the finished steps are not asked again, `second of b` is, once; one cost record per
    call that was answered."""
    held = asyncio.Event()  # never set: the call dies with its instance
    fake_llm.script_matching(MODEL, ("Plan how to do the task",), Reply.text(json.dumps(PLAN)))
    for step in ("first of a", "first of b", "second of a", "join a and b"):
        fake_llm.script_matching(MODEL, (f"This step: {step}",), Reply.text(f"<{step}>"))
    fake_llm.script_matching(
        MODEL,
        ("This step: second of b",),
        Reply.text("lost", gate=held),
        Reply.text("<second of b>"),
    )
    fake_llm.script_matching(MODEL, ("results of the plan's steps",), Reply.text("both joined"))
    async with cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        async with a.client(group.token) as on_a:
            task_id = (await submit(on_a, input="Do a and b.", kind="plan"))["task_id"]
            await _until_stored(on_a, task_id, "a2")
        await fake_llm.wait_for_requests(5, MODEL)  # the plan, a1, b1, a2 and the held b2
        await a.kill()
        async with b.client(group.token) as on_b:
            events = await stream(on_b, task_id)
            task = (await on_b.get(f"/api/v1/tasks/{task_id}")).json()
    assert_whole(events, "completed")
    assert task["answer"] == "both joined"
    assert len([e for e in events if e.event == "task_status" and e.json.get("resumed")]) == 1
    assert _requests_per_step(fake_llm) == {
        "first of a": 1,
        "first of b": 1,
        "second of a": 1,
        "second of b": 2,  # its first call died with instance a
        "join a and b": 1,
    }
    plans = [r for r in fake_llm.requests_for(MODEL) if "Plan how to do" in json.dumps(r.body)]
    assert len(plans) == 1
    records = [
        (e.json["step"]["thinking"]["event"], (e.json["step"]["thinking"].get("detail") or {}))
        for e in events
        if e.event == "reasoning_step" and (e.json["step"].get("thinking") or {}).get("event")
    ]
    completed = [detail["step"] for event, detail in records if event == "plan_step_completed"]
    assert completed == ["a1", "b1", "a2", "b2", "join"]
    costs = [c for c in await group.cost_rows(task_id) if c.model is not None]
    # The plan, five steps and the answer: each answered call billed once.
    assert len(costs) == 7
