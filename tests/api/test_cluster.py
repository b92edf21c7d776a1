"""Runs belong to the cluster: instances (real `omniforge serve` processes on one database)
take tasks from a shared queue, stream and cancel each other's runs, and resume the runs of an
instance that died or was stopped from their stored steps, making no stored call again."""

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.runs.manager import CANCEL_WAIT_S
from tests.api.helpers import stream, submit
from tests.cluster import Cluster, cluster, same_conversation
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL
from tests.sse import SSE, read_sse

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)

FAST_LEASE = {"OMNIFORGE_RUNNER_HEARTBEAT_S": "0.5"}


def assert_whole(events: list[SSE], final_state: str) -> None:
    """One writer wrote the stream: ids 1..N, one `done`, last."""
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert [e.event for e in events].count("done") == 1
    assert events[-1].event == "done"
    assert events[-1].json["final_state"] == final_state, events[-2].data


async def follow_until(client: Any, task_id: str, count: int, into: list[SSE]) -> None:
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        async for event in read_sse(response):
            into.append(event)
            if len(into) >= count:
                return


async def test_a_stream_on_one_instance_follows_a_run_on_another_and_a_cancel_there_stops_it(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    async with cluster(own_database_url, tmp_path, fake_llm) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        async with a.client(group.token) as on_a, b.client(group.token) as on_b:
            for _ in range(20):
                fake_llm.script(
                    MODEL,
                    Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
                    Reply.text("never finished", delay_s=30),
                )
                task_id = (await submit(on_a))["task_id"]
                streamed: list[SSE] = []
                following = asyncio.ensure_future(follow_until(on_b, task_id, 10_000, streamed))
                await fake_llm.wait_for_requests(2)  # in its second LLM call, on a
                asked = time.perf_counter()
                cancelled = await on_b.post(f"/api/v1/tasks/{task_id}/cancel")
                took = time.perf_counter() - asked
                await asyncio.wait_for(following, 10)
                assert cancelled.status_code == 200, cancelled.text
                assert cancelled.json()["status"] == "cancelled"
                # Answered by the notices (50-230 ms on a quiet machine; about 1 s seen with
                # the suite's other workers busy), not by the wait that gives up on them.
                assert took < CANCEL_WAIT_S, f"the cancel took {took:.3f} s"
                assert_whole(streamed, "cancelled")
                types = [e.event for e in streamed]
                # Live: the steps before the cancel came as they were made, on b.
                assert types[:2] == ["chain_started", "task_status"]
                # Both calls and results, the second call's result `cancelled`.
                assert types.count("reasoning_step") == 6
                assert streamed[-2].json["error_code"] == "cancelled"
                replayed = await stream(on_a, task_id)
                assert [e.json for e in replayed] == [e.json for e in streamed]
                task = (await on_a.get(f"/api/v1/tasks/{task_id}")).json()
                assert task["status"] == "cancelled"
                # The completed first call is kept and billed once.
                costs = await group.cost_rows(task_id)
                assert len([c for c in costs if c.model is not None]) == 1
                fake_llm.reset()
        rows = await group.task_rows()
        assert len({row.runner_id for row in rows}) == 1, "a alone ran them: a had room"


async def test_tasks_submitted_to_one_instance_are_run_by_both_never_past_their_room(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """Each instance takes at most MAX_CONCURRENT_RUNS at once; the rest wait in the queue
    for the first instance with room, whichever it is."""
    room = 2
    async with cluster(
        own_database_url, tmp_path, fake_llm, OMNIFORGE_MAX_CONCURRENT_RUNS=str(room)
    ) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        count = 12
        fake_llm.always(MODEL, Reply.text("done", delay_s=0.3))
        async with a.client(group.token) as on_a:
            ids = [(await submit(on_a))["task_id"] for _ in range(count)]
            ends = await asyncio.gather(*(stream(on_a, task_id) for task_id in ids))
        assert all(events[-1].json["final_state"] == "completed" for events in ends)
        rows = await group.task_rows()
        runners = Counter(row.runner_id for row in rows)
        assert len(runners) == 2, f"both instances ran some: {runners}"
        # Never more than `room` at once on one instance: intervals of each runner's tasks.
        for runner in runners:
            spans = [(r.started_at, r.finished_at) for r in rows if r.runner_id == runner]
            for start, _ in spans:
                overlapping = sum(1 for s, f in spans if s <= start < f)
                assert overlapping <= room
        assert {a.name, b.name} == {"a", "b"}


def script_interrupted_task(fake_llm: FakeLLMServer) -> None:
    """A calculator call, then a second LLM call that hangs on the first instance (it is
    stopped in it) and answers on the one that resumes the run."""
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"}, id="c1")]),
        Reply.text("never sent", delay_s=60),
        Reply.text("6 * 7 = 42."),
    )


async def assert_resumed(
    group: Cluster, fake_llm: FakeLLMServer, task_id: str, events: list[SSE]
) -> None:
    """Completed; the first LLM call was made once, the second (in flight at the stop) again;
    one cost record per call made to completion; ids 1..N with one `resumed` status."""
    assert_whole(events, "completed")
    resumed = [e for e in events if e.event == "task_status" and e.json.get("resumed")]
    assert len(resumed) == 1
    requests = fake_llm.requests_for(MODEL)
    assert len(requests) == 3
    first, second, again = (request.body["messages"] for request in requests)
    assert same_conversation(second, again), "the call in flight was made again, the same"
    assert first != second
    assert events[-2].json["answer"] == "6 * 7 = 42."
    steps = [e.json["step"] for e in events if e.event == "reasoning_step"]
    calls = [s for s in steps if s["type"] == "tool_call"]
    # The second LLM call's step was stored before the stop: it is not recorded twice.
    assert [c["tool_call"]["tool_name"] for c in calls] == ["llm", "calculator", "llm"]
    costs = [c for c in await group.cost_rows(task_id) if c.model is not None]
    assert len(costs) == 2


@pytest.mark.parametrize("restart", [False, True], ids=["other-instance", "same-restarted"])
async def test_a_killed_instances_run_is_resumed_from_its_stored_steps(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, restart: bool
) -> None:
    script_interrupted_task(fake_llm)
    async with cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group:
        a = await group.instance("a")
        b = None if restart else await group.instance("b")
        async with a.client(group.token) as on_a:
            task_id = (await submit(on_a))["task_id"]
            seen: list[SSE] = []
            await follow_until(on_a, task_id, 7, seen)  # through the second call's step
            await fake_llm.wait_for_requests(2)
        await a.kill()
        survivor = await group.instance("a2") if restart else b
        assert survivor is not None
        async with survivor.client(group.token) as client:
            events = await stream(client, task_id)
        await assert_resumed(group, fake_llm, task_id, events)
        assert [e.json for e in events[: len(seen)]] == [e.json for e in seen]


async def test_a_terminated_instance_hands_its_run_over_at_once_and_another_resumes_it(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """SIGTERM drains: the run in an LLM call (which may be made again) is handed back to the
    queue once the shutdown grace cuts that call, and the other instance resumes it, with no
    lease to wait for. The grace is short and the lease long, so that the two are far apart
    on a loaded machine too (a 5 s grace was once 10.5 s to the resumed end under CI load)."""
    script_interrupted_task(fake_llm)
    slow_lease = {"OMNIFORGE_RUNNER_HEARTBEAT_S": "40", "OMNIFORGE_SHUTDOWN_GRACE_S": "1"}
    async with cluster(own_database_url, tmp_path, fake_llm, **slow_lease) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        async with a.client(group.token) as on_a, b.client(group.token) as on_b:
            task_id = (await submit(on_a))["task_id"]
            seen: list[SSE] = []
            following = asyncio.ensure_future(follow_until(on_b, task_id, 10_000, seen))
            await fake_llm.wait_for_requests(2)
            stopped = time.perf_counter()
            await a.terminate()  # uvicorn exits by the signal it caught, once shut down
            await asyncio.wait_for(following, 60)
            took = time.perf_counter() - stopped
        # The lease is 120 s (three heartbeats); a hand-over takes the 1 s grace and a resume.
        assert took < 30, f"resumed {took:.1f} s after the SIGTERM: it waited for the lease"
        await assert_resumed(group, fake_llm, task_id, seen)
        assert "Application shutdown complete" in a.log
