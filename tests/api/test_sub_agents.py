"""Agents that delegate: an agent listing `agent:name` calls that agent as a tool; each call runs
a child task and chain linked to it both ways, under its parent's budget, its usage rolled up."""

import asyncio
import time
from decimal import Decimal
from typing import Any

from tests.api.helpers import cost_of, define_agent, get_json, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


def _results(chain: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [
        step["tool_result"]
        for step in chain["steps"]
        if step["tool_result"] is not None and step["tool_result"]["tool_name"] == tool
    ]


async def test_a_parent_runs_two_children_in_parallel_linked_both_ways_with_exact_totals(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "researcher", description="Finds facts.", tools=[])
    await define_agent(service, tenant, "writer", description="Writes prose.", tools=[])
    await define_agent(
        service, tenant, "lead", tools=["agent:researcher", "agent:writer", "calculator"]
    )
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls(
            [
                ToolCall("agent__researcher", {"task": "Find the boiling point of water."}),
                ToolCall("agent__writer", {"task": "Write one line about water."}),
            ],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        # The children ask in either order: whichever asks first gets the first reply.
        Reply.text("first child's answer", prompt_tokens=30, completion_tokens=5),
        Reply.text("second child's answer", prompt_tokens=40, completion_tokens=6),
        Reply.text("Done: both answered.", prompt_tokens=200, completion_tokens=10),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, input="Research and write.", agent="lead")
        parent_id = accepted["task_id"]
        events = await stream(client, parent_id)
        parent = await get_json(client, f"/api/v1/tasks/{parent_id}")
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")
        costs = await get_json(client, f"/api/v1/tasks/{parent_id}/costs")
        children = {}
        for tool in ("agent__researcher", "agent__writer"):
            [result] = _results(chain, tool)
            child = await get_json(client, f"/api/v1/tasks/{result['child_task_id']}")
            child_chain = await get_json(client, f"/api/v1/tasks/{child['id']}/chain")
            children[tool] = (result, child, child_chain)
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        report = await get_json(admin, f"/api/v1/tenants/{tenant}/costs?group_by=agent")

    assert events[-1].json["final_state"] == "completed"
    assert parent["status"] == "completed"
    assert parent["result"] == "Done: both answered."
    # linked both ways: the children name the parent's task, call step and chain; the
    # parent's chain lists the children's chains
    calls = {
        step["tool_call"]["tool_name"]: step
        for step in chain["steps"]
        if step["tool_call"] is not None and step["tool_call"]["tool_type"] == "sub_agent"
    }
    assert set(calls) == {"agent__researcher", "agent__writer"}
    for tool, (result, child, child_chain) in children.items():
        assert result["success"] is True
        assert result["result"] == child["result"]
        assert child["status"] == "completed"
        assert child["agent"]["name"] == tool.removeprefix("agent__")
        assert child["parent_task_id"] == parent_id
        assert child["parent_step_id"] == calls[tool]["id"]
        assert child["root_task_id"] == parent_id
        assert child["depth"] == 1
        assert child_chain["parent_chain_id"] == parent["chain_id"]
        assert result["child_chain_id"] == child["chain_id"]
        # the call's result carries what the child used, as its own chain counts it
        assert Decimal(result["cost_usd"]) == Decimal(child["usage"]["total_cost_usd"])
        assert result["llm_calls"] == child["usage"]["llm_calls"] == 1
    assert sorted(chain["child_chain_ids"]) == sorted(
        c["chain_id"] for _, c, _ in children.values()
    )
    assert {c["result"] for _, c, _ in children.values()} == {
        "first child's answer",
        "second child's answer",
    }
    # the parent's totals are its own calls and its children's, to the Decimal
    everything = cost_of(100, 20) + cost_of(30, 5) + cost_of(40, 6) + cost_of(200, 10)
    assert Decimal(parent["usage"]["total_cost_usd"]) == everything
    assert Decimal(chain["metrics"]["total_cost_usd"]) == everything
    assert parent["usage"]["llm_calls"] == 4
    assert parent["usage"]["input_tokens"] == 100 + 30 + 40 + 200
    # every call is billed once, by the task that made it: the family's records sum to it
    assert Decimal(costs["totals"]["cost_usd"]) == everything
    assert len(costs["items"]) == 4
    assert {item["task_id"] for item in costs["items"]} == {
        parent_id,
        *(c["id"] for _, c, _ in children.values()),
    }
    by_agent = {group["key"]: Decimal(group["cost_usd"]) for group in report["groups"]}
    assert by_agent["lead"] == cost_of(100, 20) + cost_of(200, 10)
    assert by_agent["researcher"] + by_agent["writer"] == cost_of(30, 5) + cost_of(40, 6)
    assert len(fake.requests_for(MODEL)) == 4


async def test_three_parallel_children_never_spend_past_the_parents_cost_budget(
    service: Service, tenant: str
) -> None:
    # Each child's one reply costs $0.00201, about 40 % of the parent's budget of $0.0051.
    for name in ("alpha", "beta", "gamma"):
        await define_agent(
            service, tenant, name, tools=[], instructions="Answer.", max_output_tokens=1000
        )
    await define_agent(
        service,
        tenant,
        "lead",
        tools=["agent:alpha", "agent:beta", "agent:gamma"],
        instructions="Delegate.",
        max_output_tokens=50,
    )
    budget = Decimal("0.0051")
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls(
            [
                ToolCall(f"agent__{name}", {"task": f"Part {name}."})
                for name in ("alpha", "beta", "gamma")
            ],
            prompt_tokens=10,
            completion_tokens=10,
        ),
        Reply.text("a child's part", prompt_tokens=10, completion_tokens=1000),
        Reply.text("a child's part", prompt_tokens=10, completion_tokens=1000),
        Reply.text("Two of three parts.", prompt_tokens=10, completion_tokens=10),
    )
    async with service.client(tenant) as client:
        accepted = await submit(
            client,
            input="Do it in three parts.",
            agent="lead",
            budget={"max_cost_usd": str(budget)},
        )
        parent_id = accepted["task_id"]
        await stream(client, parent_id)
        parent = await get_json(client, f"/api/v1/tasks/{parent_id}")
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")
        costs = await get_json(client, f"/api/v1/tasks/{parent_id}/costs")
        results = [r for n in ("alpha", "beta", "gamma") for r in _results(chain, f"agent__{n}")]
        refused = [r for r in results if not r["success"]]
        [failed] = refused
        child = await get_json(client, f"/api/v1/tasks/{failed['child_task_id']}")
        child_chain = await get_json(client, f"/api/v1/tasks/{child['id']}/chain")

    spent = Decimal(costs["totals"]["cost_usd"])
    assert spent <= budget
    assert spent == cost_of(10, 10) * 2 + cost_of(10, 1000) * 2
    assert Decimal(parent["usage"]["total_cost_usd"]) == spent
    assert parent["status"] == "completed"
    assert len(fake.requests_for(MODEL)) == 4  # the third child's call was never made
    # the refused call is named in the child's chain, and the child's failure is an
    # observation of the parent
    assert failed["error_code"] == "sub_agent_failed"
    assert "budget_exceeded" in failed["error"]
    assert child["status"] == "failed"
    assert child["error_code"] == "budget_exceeded"
    [refusal] = [
        s["tool_result"]
        for s in child_chain["steps"]
        if s["tool_result"] is not None and not s["tool_result"]["success"]
    ]
    assert refusal["tool_type"] == "llm"
    assert refusal["error_code"] == "budget_exceeded"
    assert f"the budget of task {parent_id}" in child["error_message"]
    assert "max_cost_usd ($0.0051)" in child["error_message"]
    # each child's own budget was carved from what the parent had left
    assert Decimal(child["budget"]["max_cost_usd"]) <= budget - cost_of(10, 10)


async def test_three_parallel_children_never_make_more_llm_calls_than_the_parent_allows(
    service: Service, tenant: str
) -> None:
    for name in ("alpha", "beta", "gamma"):
        await define_agent(service, tenant, name, tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:alpha", "agent:beta", "agent:gamma"])
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls(
            [
                ToolCall(f"agent__{name}", {"task": f"Part {name}."})
                for name in ("alpha", "beta", "gamma")
            ]
        ),
        Reply.text("a part"),
        Reply.text("a part"),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, agent="lead", budget={"max_llm_calls": 3})
        parent_id = accepted["task_id"]
        events = await stream(client, parent_id)
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")

    # the parent's call and two children's: the third child's call and the parent's next one
    # are refused before they are made
    assert len(fake.requests_for(MODEL)) == 3
    results = [r for n in ("alpha", "beta", "gamma") for r in _results(chain, f"agent__{n}")]
    assert sorted(r["success"] for r in results) == [False, True, True]
    failed = [e.json for e in events if e.event == "chain_failed"]
    assert failed
    assert failed[0]["error_code"] == "budget_exceeded"
    assert failed[0]["details"]["limit"] == "max_llm_calls"


async def test_a_cycle_is_refused_naming_the_agents_that_close_it(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "ping", tools=[])
    await define_agent(service, tenant, "pong", tools=["agent:ping"])
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        changed = await admin.patch("/api/v1/agents/ping", json={"tools": ["agent:pong"]})
        assert changed.status_code == 200, changed.text
        itself = await admin.patch("/api/v1/agents/ping", json={"tools": ["agent:ping"]})
    assert itself.status_code == 422
    assert "may not call itself" in itself.text
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__pong", {"task": "Go on."})]),
        Reply.tool_calls([ToolCall("agent__ping", {"task": "Back again."})]),
        Reply.text("pong could not call ping"),
        Reply.text("ping is done"),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, agent="ping")
        await stream(client, accepted["task_id"])
        chain = await get_json(client, f"/api/v1/tasks/{accepted['task_id']}/chain")
        [call] = _results(chain, "agent__pong")
        pong_chain = await get_json(client, f"/api/v1/tasks/{call['child_task_id']}/chain")

    [refused] = _results(pong_chain, "agent__ping")
    assert refused["success"] is False
    assert refused["error_code"] == "agent_cycle"
    assert "ping -> pong -> ping" in refused["error"]
    assert "child_task_id" not in refused  # no child was started
    assert call["success"] is True
    assert call["result"] == "pong could not call ping"


async def test_a_call_deeper_than_the_depth_limit_is_refused(service: Service, tenant: str) -> None:
    names = ["d0", "d1", "d2", "d3", "d4"]
    for name, below in reversed(list(zip(names, [*names[1:], None], strict=True))):
        await define_agent(service, tenant, name, tools=[] if below is None else [f"agent:{below}"])
    fake = service.fake_llm
    fake.script(
        MODEL,
        *(
            Reply.tool_calls([ToolCall(f"agent__{below}", {"task": "Deeper."})])
            for below in names[1:]
        ),
        *(Reply.text(f"answer of {name}") for name in reversed(names[:4])),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, agent="d0")
        await stream(client, accepted["task_id"])
        task = await get_json(client, f"/api/v1/tasks/{accepted['task_id']}")
        chain = await get_json(client, f"/api/v1/tasks/{accepted['task_id']}/chain")
        depth = 0
        while True:  # down the family, one child per level
            calls = [
                r
                for s in chain["steps"]
                if (r := s["tool_result"]) is not None and r["tool_type"] == "sub_agent"
            ]
            [call] = calls
            if "child_task_id" not in call:
                break
            depth += 1
            child = await get_json(client, f"/api/v1/tasks/{call['child_task_id']}")
            assert child["depth"] == depth
            assert child["root_task_id"] == accepted["task_id"]
            chain = await get_json(client, f"/api/v1/tasks/{child['id']}/chain")

    assert task["status"] == "completed"
    assert task["result"] == "answer of d0"
    assert depth == 3  # d3 ran at the default limit; its call of d4 would have been the 4th
    assert call["error_code"] == "agent_depth_exceeded"
    assert "OMNIFORGE_MAX_AGENT_DEPTH" in call["error"]


async def test_cancelling_the_parent_stops_its_running_child_at_once(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "slow", tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:slow"])
    never = asyncio.Event()
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__slow", {"task": "Take your time."})]),
        Reply.text("too late", gate=never),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, agent="lead")
        parent_id = accepted["task_id"]
        await fake.wait_for_requests(2, MODEL)  # the child's call is under way
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")
        [call] = [
            s
            for s in chain["steps"]
            if s["tool_call"] and s["tool_call"]["tool_type"] == "sub_agent"
        ]
        children = await get_json(client, "/api/v1/tasks?limit=10")
        [child] = [t for t in children["items"] if t["parent_task_id"] == parent_id]
        assert child["parent_step_id"] == call["id"]
        assert child["status"] == "working"
        started = time.monotonic()
        cancelled = await client.post(f"/api/v1/tasks/{parent_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        child_events = await stream(client, child["id"])
        stopped_s = time.monotonic() - started
        child = await get_json(client, f"/api/v1/tasks/{child['id']}")
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")

    assert child_events[-1].json["final_state"] == "cancelled"
    assert child["status"] == "cancelled"
    assert stopped_s < 0.5
    never.set()
    # the cancelled call's result still names the child it started
    [result] = [s["tool_result"] for s in chain["steps"] if s["parent_step_id"] == call["id"]]
    assert result["error_code"] == "cancelled"
    assert result["child_task_id"] == child["id"]
    assert result["child_chain_id"] == child["chain_id"]


async def test_a_call_runs_the_sub_agent_version_its_model_was_shown_when_the_run_started(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "helper", description="Helps, first edition.", tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:helper"])
    held = asyncio.Event()
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__helper", {"task": "Help."})], gate=held),
        Reply.text("helped"),
        Reply.text("Done."),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, agent="lead"))["task_id"]
        await fake.wait_for_requests(1, MODEL)  # the run has started, its tools described
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            changed = await admin.patch(
                "/api/v1/agents/helper", json={"description": "Helps, second edition."}
            )
        assert changed.status_code == 200, changed.text
        assert changed.json()["version"] == 2
        held.set()
        await stream(client, parent_id)
        chain = await get_json(client, f"/api/v1/tasks/{parent_id}/chain")
        [result] = _results(chain, "agent__helper")
        child = await get_json(client, f"/api/v1/tasks/{result['child_task_id']}")

    [offered] = fake.requests_for(MODEL)[0].body["tools"]
    assert offered["function"]["description"] == "Helps, first edition."
    assert child["agent"] == {"name": "helper", "version": 1}
