"""One stream for a family: a task's stream carries its sub-agents' events at every depth, in
the order they happened, each marked with the child's task, chain, depth and the call step
that started it; resuming with the parent's ids misses nothing and repeats nothing; each
reader sees a child's steps as it sees that child's own stream; the parent's usage grows
while its children run."""

import asyncio
from decimal import Decimal
from typing import Any

from tests.api.helpers import configure, cost_of, define_agent, get_json, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import SSE, collect, read_sse

MARKS = ("depth", "parent_step_id")


def _own(events: list[SSE], task_id: str) -> list[SSE]:
    return [e for e in events if "depth" not in e.json and e.json["task_id"] == task_id]


def _of(events: list[SSE], task_id: str) -> list[SSE]:
    """The events of `task_id` relayed into another task's stream."""
    return [e for e in events if e.json["task_id"] == task_id and "depth" in e.json]


def _unmarked(event: SSE) -> tuple[str, dict[str, Any]]:
    """A relayed event as its child's own stream has it."""
    return event.event, {k: v for k, v in event.json.items() if k not in MARKS}


def _sub_agent_calls(chain: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The chain's sub-agent call steps, by tool name."""
    return {
        step["tool_call"]["tool_name"]: step
        for step in chain["steps"]
        if step["tool_call"] is not None and step["tool_call"]["tool_type"] == "sub_agent"
    }


def _step_of(event: SSE) -> dict[str, Any]:
    """The step of the task's own `reasoning_step` event (empty for any other event)."""
    if event.event != "reasoning_step" or "depth" in event.json:
        return {}
    step: dict[str, Any] = event.json["step"]
    return step


def _position(events: list[SSE], predicate: Any) -> int:
    [index] = [i for i, event in enumerate(events) if predicate(event)]
    return index


async def test_the_parents_stream_carries_both_childrens_events_in_order_and_resumes_anywhere(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "researcher", tools=[])
    await define_agent(service, tenant, "writer", tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:researcher", "agent:writer"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [
                ToolCall("agent__researcher", {"task": "Compute 6 * 7."}),
                ToolCall("agent__writer", {"task": "Write one line."}),
            ]
        ),
        # Both children ask at once; whichever asks first gets the first reply.
        Reply.text("one line"),
        Reply.text("another line"),
        Reply.text("Both answered."),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, input="Delegate.", agent="lead"))["task_id"]
        family = await stream(client, parent_id)
        own_only = await stream(client, parent_id, params={"sub_agents": "false"})
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")
        calls = _sub_agent_calls(chain)
        children = {}
        for tool, call in calls.items():
            [result] = [
                s["tool_result"]
                for s in chain["steps"]
                if s["tool_result"] and s["parent_step_id"] == call["id"]
            ]
            child = await get_json(client, f"/api/v1/tasks/{result['child_task_id']}")
            children[tool] = (call, child, await stream(client, child["id"]))
        # resumed after every event of the family stream (the task has ended: from the store)
        resumed = {
            cut: await stream(client, parent_id, headers={"Last-Event-ID": str(family[cut].id)})
            for cut in range(len(family) - 1)
        }

    # ids are the parent's: contiguous from 1, the parent's own `done` last and alone
    assert [e.id for e in family] == list(range(1, len(family) + 1))
    assert [e.event for e in family].count("done") == 1
    assert family[-1].event == "done"
    assert "depth" not in family[-1].json
    # without its sub-agents the stream is the parent's own events, ids unchanged
    assert [(e.id, e.json) for e in own_only] == [(e.id, e.json) for e in _own(family, parent_id)]
    assert len(own_only) + sum(len(_of(family, c["id"])) for _, c, _ in children.values()) == len(
        family
    )
    for call, child, child_stream in children.values():
        relayed = _of(family, child["id"])
        # every event of the child's own stream but its `done`, in its order, marked
        assert [_unmarked(e) for e in relayed] == [
            (e.event, e.json) for e in child_stream if e.event != "done"
        ]
        for event in relayed:
            assert event.json["depth"] == 1
            assert event.json["parent_step_id"] == call["id"]
            assert event.json["chain_id"] == child["chain_id"]
        # between the call that started the child and the result that answered it
        call_id = call["id"]
        started = _position(family, lambda e, step=call_id: _step_of(e).get("id") == step)
        answered = _position(
            family, lambda e, step=call_id: _step_of(e).get("parent_step_id") == step
        )
        positions = [family.index(event) for event in relayed]
        assert started < min(positions)
        assert max(positions) < answered
        assert {e.event for e in relayed} >= {"task_status", "reasoning_step", "chain_completed"}
    # resuming after any event gives exactly the rest: no gap, no duplicate
    for cut, rest in resumed.items():
        assert [(e.id, e.event, e.json) for e in rest] == [
            (e.id, e.event, e.json) for e in family[cut + 1 :]
        ], f"resumed after event {family[cut].id}"


async def _three_generations(service: Service, tenant: str) -> None:
    """Agents `root` -> `middle` -> `leaf`, and the replies of one run of them."""
    await define_agent(service, tenant, "leaf", tools=[])
    await define_agent(service, tenant, "middle", tools=["agent:leaf"])
    await define_agent(service, tenant, "root", tools=["agent:middle"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__middle", {"task": "Ask the leaf."})]),
        Reply.tool_calls([ToolCall("agent__leaf", {"task": "Say hi."})]),
        Reply.text("hi"),
        Reply.text("the leaf said hi"),
        Reply.text("Done."),
    )


async def test_a_grandchilds_events_reach_every_ancestors_stream_at_its_depth(
    service: Service, tenant: str
) -> None:
    await _three_generations(service, tenant)
    async with service.client(tenant) as client:
        root_id = (await submit(client, input="Go.", agent="root"))["task_id"]
        root_stream = await stream(client, root_id)
        root_chain = await get_json(client, f"/api/v1/tasks/{root_id}/chain")
        middle_call = _sub_agent_calls(root_chain)["agent__middle"]
        [middle] = {e.json["task_id"] for e in root_stream if e.json.get("depth") == 1}
        middle_task = await get_json(client, f"/api/v1/tasks/{middle}")
        middle_stream = await stream(client, middle)
        middle_chain = await get_json(client, f"/api/v1/tasks/{middle}/chain")
        leaf_call = _sub_agent_calls(middle_chain)["agent__leaf"]
        [leaf] = {e.json["task_id"] for e in root_stream if e.json.get("depth") == 2}
        leaf_stream = await stream(client, leaf)

    assert middle_task["parent_step_id"] == middle_call["id"]
    expected_leaf = [(e.event, e.json) for e in leaf_stream if e.event != "done"]
    for ancestor_stream in (root_stream, middle_stream):
        relayed = _of(ancestor_stream, leaf)
        assert [_unmarked(e) for e in relayed] == expected_leaf
        assert {(e.json["depth"], e.json["parent_step_id"]) for e in relayed} == {
            (2, leaf_call["id"])
        }
        assert [e.id for e in ancestor_stream] == list(range(1, len(ancestor_stream) + 1))
    # the root's stream has the middle's own events once (not the middle's relays of the leaf)
    assert [_unmarked(e) for e in _of(root_stream, middle)] == [
        (e.event, e.json) for e in _own(middle_stream, middle) if e.event != "done"
    ]
    assert {e.json["depth"] for e in _of(root_stream, middle)} == {1}


async def test_resuming_the_family_stream_mid_run_misses_nothing_and_usage_grows_live(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "worker", tools=["calculator"])
    await define_agent(service, tenant, "lead", tools=["agent:worker"])
    held = asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("agent__worker", {"task": "Compute."})],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"})], prompt_tokens=30, completion_tokens=5
        ),
        Reply.text("42", prompt_tokens=40, completion_tokens=6, gate=held),
        Reply.text("The worker says 42.", prompt_tokens=200, completion_tokens=10),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, input="Delegate.", agent="lead"))["task_id"]
        first: list[SSE] = []
        async with client.stream("GET", f"/api/v1/tasks/{parent_id}/events") as response:
            async for event in read_sse(response):
                first.append(event)
                step = event.json.get("step") if event.event == "reasoning_step" else None
                # the child's fifth step is its second LLM call, held: stop reading there
                if step and "depth" in event.json and step["step_number"] == 5:
                    break
        # the child holds its second LLM call: the parent's task already counts what the
        # child used so far (its first call, and its second as started)
        running = await get_json(client, f"/api/v1/tasks/{parent_id}")
        assert running["status"] == "working"
        assert running["usage"]["llm_calls"] == 1 + 2
        assert Decimal(running["usage"]["total_cost_usd"]) == cost_of(100, 20) + cost_of(30, 5)
        assert running["usage"]["input_tokens"] == 100 + 30
        # resumed with the last id seen, while the child still runs
        async with client.stream(
            "GET", f"/api/v1/tasks/{parent_id}/events", headers={"Last-Event-ID": str(first[-1].id)}
        ) as response:
            held.set()
            rest = await collect(response)
        whole = await stream(client, parent_id)
        ended = await get_json(client, f"/api/v1/tasks/{parent_id}")

    assert [(e.id, e.json) for e in first + rest] == [(e.id, e.json) for e in whole]
    assert [e.id for e in whole] == list(range(1, len(whole) + 1))
    assert ended["status"] == "completed"
    everything = cost_of(100, 20) + cost_of(30, 5) + cost_of(40, 6) + cost_of(200, 10)
    assert Decimal(ended["usage"]["total_cost_usd"]) == everything
    assert ended["usage"]["llm_calls"] == 4


VISIBILITY = {
    "tools": {"calculator": "hidden"},
    "roles": {
        "member": {"tools": {"calculator": "full"}},
        "viewer": {"tool_types": {"llm": "summary"}},
    },
}


async def test_each_reader_sees_a_childs_steps_in_the_family_stream_as_in_the_childs_own(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "visibility", VISIBILITY)
    await define_agent(service, tenant, "worker", tools=["calculator"])
    await define_agent(service, tenant, "lead", tools=["agent:worker"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__worker", {"task": "Compute."})]),
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text("42"),
        Reply.text("The worker says 42."),
    )
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        parent_id = (await submit(member, input="Delegate.", agent="lead"))["task_id"]
        await stream(member, parent_id)
    seen: dict[str, tuple[list[SSE], list[SSE]]] = {}
    for role in ("member", "viewer"):
        async with service.client(tenant, sub="alice", roles=(role,)) as reader:
            family = await stream(reader, parent_id)
            [child_id] = {e.json["task_id"] for e in family if "depth" in e.json}
            seen[role] = (family, await stream(reader, child_id))

    for role, (family, child_stream) in seen.items():
        child_id = child_stream[0].json["task_id"]
        relayed = _of(family, child_id)
        assert [_unmarked(e) for e in relayed] == [
            (e.event, e.json) for e in child_stream if e.event != "done"
        ], role
        steps = [e.json["step"] for e in relayed if e.event == "reasoning_step"]
        calculator = [
            s
            for s in steps
            if (s.get("tool_call") or s.get("tool_result") or {}).get("tool_name") == "calculator"
        ]
        llm = [s for s in steps if (s.get("tool_call") or {}).get("tool_type") == "llm"]
        summaries = [s for s in steps if s["visibility"]["level"] == "summary"]
        if role == "member":
            assert len(calculator) == 2  # its call and result, whole
            assert len(llm) == 2
            assert summaries == []
        else:
            assert calculator == []  # hidden from a viewer at depth 1 as at depth 0
            assert llm == []
            assert len(summaries) == 4


async def test_a_reader_who_does_not_see_a_sub_agent_call_whole_gets_none_of_its_family(
    service: Service, tenant: str
) -> None:
    await configure(
        service,
        tenant,
        "visibility",
        {
            "tools": {"agent__middle": "hidden"},
            "roles": {"member": {"tools": {"agent__middle": "full"}}},
        },
    )
    await _three_generations(service, tenant)
    async with service.client(tenant, sub="alice", roles=("member",)) as member:
        root_id = (await submit(member, input="Go.", agent="root"))["task_id"]
        seen_by_member = await stream(member, root_id)
    async with service.client(tenant, sub="alice", roles=("viewer",)) as viewer:
        seen_by_viewer = await stream(viewer, root_id)
        # resumed anywhere, still nothing of them
        resumed = await stream(
            viewer, root_id, headers={"Last-Event-ID": str(seen_by_viewer[1].id)}
        )

    assert {e.json["depth"] for e in seen_by_member if "depth" in e.json} == {1, 2}
    assert [e for e in seen_by_viewer if "depth" in e.json] == []
    assert [e for e in resumed if "depth" in e.json] == []
    assert seen_by_viewer[-1].event == "done"
    # the viewer's ids are the stream's own: what it gets resumes where it left off
    assert [e.id for e in resumed] == [e.id for e in seen_by_viewer[2:]]
