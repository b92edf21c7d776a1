"""Replays and forks of recorded tasks through the running service: a replay takes every LLM and
tool result from the recording (the fake model and the tool's server see no request) and says
whether it reproduced the chain step for step or where it first went another way; a fork takes
the steps up to one as recorded, unbilled, and goes on live."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
from aiohttp import web

from tests.api.helpers import (
    assert_invalid,
    assert_problem,
    configure,
    define_agent,
    open_network,
    stream,
)
from tests.factories import fake_deployment
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, service_with_model
from tests.tools.net.servers import serve

OTHER = "other-model"
OTHER_PRICES = (Decimal("0.00001"), Decimal("0.00003"))
INSTRUCTIONS = "You check stock levels precisely."


@asynccontextmanager
async def stock_api() -> AsyncIterator[tuple[list[str], str]]:
    """A stock service on 127.0.0.1 that records every request; its URL."""
    received: list[str] = []

    async def level(request: web.Request) -> web.Response:
        received.append(request.path_qs)
        return web.json_response({"sku": "A-17", "on_hand": 42})

    app = web.Application()
    app.router.add_get("/stock", level)
    async with serve(app) as port:
        yield received, f"http://127.0.0.1:{port}/stock?sku=A-17"


def script_stock_task(fake: FakeLLMServer, url: str, model: str = MODEL) -> None:
    """calculator, then the stock service (http_request), then the answer."""
    fake.script(
        model,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "6 * 7"}, id="c1")],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.tool_calls(
            [ToolCall("http_request", {"method": "GET", "url": url}, id="c2")],
            prompt_tokens=150,
            completion_tokens=25,
        ),
        Reply.text("42 on hand, as computed.", prompt_tokens=200, completion_tokens=30),
    )


async def run_to_end(client: httpx.AsyncClient, response: httpx.Response) -> dict[str, Any]:
    """The task a 202 accepted, read once its stream has ended."""
    assert response.status_code == 202, response.text
    task_id = response.json()["task_id"]
    assert response.headers["location"] == f"/api/v1/tasks/{task_id}"
    events = await stream(client, task_id)
    assert events[-1].event == "done"
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{task_id}")).json()
    return task


async def chain_of(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/v1/tasks/{task_id}/chain")
    assert response.status_code == 200, response.text
    chain: dict[str, Any] = response.json()
    return chain


def contents(chain: dict[str, Any]) -> list[dict[str, Any]]:
    """What a chain's steps say, without what differs between two runs of them (ids, times;
    the steps an answer cites are named by number)."""
    numbers = {step["id"]: step["step_number"] for step in chain["steps"]}
    return [content(step, numbers) for step in chain["steps"]]


def content(step: dict[str, Any], numbers: dict[str, int]) -> dict[str, Any]:
    kept = {key: step[key] for key in ("step_number", "type", "thinking")}
    if step["synthesis"] is not None:
        sources = [numbers[source] for source in step["synthesis"]["sources"]]
        kept["synthesis"] = {**step["synthesis"], "sources": sources}
    if step["tool_call"] is not None:
        call = step["tool_call"]
        kept["tool_call"] = {k: call[k] for k in ("tool_name", "tool_type", "arguments")}
    if step["tool_result"] is not None:
        result = step["tool_result"]
        kept["tool_result"] = {k: result[k] for k in ("tool_name", "success", "result", "error")}
    return kept


async def recorded_task(
    service: Service, tenant: str, received: list[str], url: str, **agent: Any
) -> dict[str, Any]:
    """A completed task of agent `stocker`: two LLM-chosen tools, three LLM calls."""
    await open_network(service, tenant, ["127.0.0.1/32"])
    await configure(service, tenant, "tools", {"enabled_tools": ["calculator", "http_request"]})
    await define_agent(
        service,
        tenant,
        "stocker",
        instructions=INSTRUCTIONS,
        tools=["calculator", "http_request"],
        **agent,
    )
    script_stock_task(service.fake_llm, url)
    async with service.client(tenant) as client:
        submitted = await client.post(
            "/api/v1/tasks", json={"input": "How many A-17 are on hand?", "agent": "stocker"}
        )
        task = await run_to_end(client, submitted)
    assert task["status"] == "completed", task
    assert len(service.fake_llm.requests_for(MODEL)) == 3
    assert len(received) == 1
    return task


async def test_a_replay_reproduces_a_two_tool_task_without_calling_the_model_or_the_tools(
    service: Service, tenant: str
) -> None:
    async with stock_api() as (received, url):
        source = await recorded_task(service, tenant, received, url)
        async with service.client(tenant, sub="bob") as client:
            replayed = await run_to_end(
                client, await client.post(f"/api/v1/tasks/{source['id']}/replay", json={})
            )
            source_chain = await chain_of(client, source["id"])
            replay_chain = await chain_of(client, replayed["id"])
            events = await stream(client, replayed["id"])
            costs = (await client.get(f"/api/v1/tasks/{replayed['id']}/costs")).json()
    # Neither the model nor the stock service saw another request.
    assert len(service.fake_llm.requests_for(MODEL)) == 3
    assert received == ["/stock?sku=A-17"]
    assert replayed["status"] == "completed", replayed["replay_report"]
    assert replayed["replayed_from"] == source["id"]
    assert replayed["user_id"] == "bob"
    assert replayed["started_at"] is not None
    assert replayed["result"] == source["result"] == "42 on hand, as computed."
    recorded = source_chain["steps"]
    assert replayed["replay_report"] == {
        "reproduced": True,
        "match": "requests",
        "recorded_steps": len(recorded),
        "matched_steps": len(recorded),
        "divergence": None,
    }
    # The chain is the recording's, step for step, each naming the step it repeats.
    assert replay_chain["replayed_from"] == source_chain["id"]
    assert contents(replay_chain) == contents(source_chain)
    assert [s["copied_from"] for s in replay_chain["steps"]] == [s["id"] for s in recorded]
    assert not {s["id"] for s in replay_chain["steps"]} & {s["id"] for s in recorded}
    # Its stream is a new task's: from chain_started, every step, gap-free, one done.
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].event == "chain_started"
    assert sum(1 for e in events if e.event == "reasoning_step") == len(recorded)
    assert [e.event for e in events].count("done") == 1
    assert not any(e.event == "task_status" and e.json.get("resumed") for e in events)
    # Nothing billed: no cost record, no usage.
    assert costs["items"] == []
    assert replayed["usage"]["llm_calls"] == 0
    assert replayed["usage"]["total_tokens"] == 0
    assert Decimal(replayed["usage"]["total_cost_usd"]) == 0
    assert source["usage"]["llm_calls"] == 3


async def test_a_replay_without_a_body_is_one_with_the_defaults(
    service: Service, tenant: str
) -> None:
    """Every field of a replay's body is optional: no body at all is the empty one."""
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with service.client(tenant) as client:
        source = await run_to_end(
            client, await client.post("/api/v1/tasks", json={"input": "Say done."})
        )
        path = f"/api/v1/tasks/{source['id']}/replay"
        without_body = await run_to_end(client, await client.post(path))
        empty_body = await run_to_end(client, await client.post(path, json={}))
    assert len(service.fake_llm.requests_for(MODEL)) == 1
    for replayed in (without_body, empty_body):
        assert replayed["status"] == "completed", replayed
        assert replayed["replayed_from"] == source["id"]
        assert replayed["replay_report"]["match"] == "requests"
        assert replayed["replay_report"]["reproduced"] is True


async def test_after_the_instructions_change_the_replay_names_the_first_diverging_step(
    service: Service, tenant: str
) -> None:
    async with stock_api() as (received, url):
        source = await recorded_task(service, tenant, received, url)
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            changed = await admin.patch(
                "/api/v1/agents/stocker", json={"instructions": "You guess stock levels."}
            )
            assert changed.status_code == 200, changed.text
            assert changed.json()["version"] == 2
            diverged = await run_to_end(
                admin,
                await admin.post(
                    f"/api/v1/tasks/{source['id']}/replay", json={"agent": "stocker@2"}
                ),
            )
            # Matching the agent's actions only, the same replies make the same steps.
            same_actions = await run_to_end(
                admin,
                await admin.post(
                    f"/api/v1/tasks/{source['id']}/replay",
                    json={"agent": "stocker@2", "match": "actions"},
                ),
            )
    assert len(service.fake_llm.requests_for(MODEL)) == 3
    assert len(received) == 1
    assert diverged["status"] == "failed"
    assert diverged["error_code"] == "replay_diverged"
    report = diverged["replay_report"]
    assert report["reproduced"] is False
    assert report["matched_steps"] == 0
    divergence = report["divergence"]
    assert divergence["step_number"] == 1
    assert divergence["recorded"] == divergence["replayed"] == "a call of 'llm'"
    assert divergence["field"].startswith("tool_call.arguments.messages.0.content")
    assert INSTRUCTIONS in divergence["recorded_value"]
    assert "You guess stock levels." in divergence["replayed_value"]
    assert "step 1" in diverged["error_message"]
    assert same_actions["status"] == "completed", same_actions
    assert same_actions["replay_report"]["reproduced"] is True
    assert same_actions["replay_report"]["match"] == "actions"


async def test_a_replay_that_goes_another_way_stops_there_without_a_live_call(
    service: Service, tenant: str
) -> None:
    """An agent version without the stock tool cannot make the recorded call: the replay
    diverges at that call, and the tool is not reached."""
    async with stock_api() as (received, url):
        source = await recorded_task(service, tenant, received, url)
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            await admin.patch("/api/v1/agents/stocker", json={"tools": ["calculator"]})
            diverged = await run_to_end(
                admin,
                await admin.post(
                    f"/api/v1/tasks/{source['id']}/replay",
                    json={"agent": "stocker@2", "match": "actions"},
                ),
            )
    assert len(received) == 1
    assert len(service.fake_llm.requests_for(MODEL)) == 3
    assert diverged["error_code"] == "replay_diverged"
    divergence = diverged["replay_report"]["divergence"]
    assert divergence["step_number"] > 1
    assert diverged["replay_report"]["matched_steps"] == divergence["step_number"] - 1


async def test_a_fork_takes_the_steps_up_to_k_unbilled_and_goes_on_live_with_another_model(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, tenant: str
) -> None:
    price_in, price_out = OTHER_PRICES
    other = fake_deployment(
        fake_llm, OTHER, input_cost=str(price_in), output_cost=str(price_out), native_tools=True
    )
    async with (
        stock_api() as (received, url),
        service_with_model(tmp_path, database_url, fake_llm, other) as service,
    ):
        source = await recorded_task(service, tenant, received, url)
        async with service.client(tenant) as client:
            source_chain = await chain_of(client, source["id"])
            # Steps 1-4: the first LLM call and the calculator, as recorded; then live.
            fake_llm.script(
                OTHER,
                Reply.text("About 42, I would say.", prompt_tokens=400, completion_tokens=10),
            )
            fork = await run_to_end(
                client,
                await client.post(
                    f"/api/v1/tasks/{source['id']}/fork", json={"from_step": 4, "model": OTHER}
                ),
            )
            fork_chain = await chain_of(client, fork["id"])
            fork_costs = (await client.get(f"/api/v1/tasks/{fork['id']}/costs")).json()
        async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
            report = await admin.get(f"/api/v1/tenants/{tenant}/costs", params={"group_by": "task"})
    assert fork["status"] == "completed", fork
    assert fork["forked_from"] == source["id"]
    assert fork["fork_step"] == 4
    assert fork["model"] == OTHER
    assert fork["result"] == "About 42, I would say."
    assert fork_chain["forked_from"] == source_chain["id"]
    recorded, steps = source_chain["steps"], fork_chain["steps"]
    assert contents(fork_chain)[:4] == contents(source_chain)[:4]
    assert [s["copied_from"] for s in steps[:4]] == [s["id"] for s in recorded[:4]]
    live = steps[4:]
    assert all("copied_from" not in s for s in live)
    assert live[0]["tool_call"]["tool_name"] == "llm"
    assert live[0]["tool_call"]["model"] == OTHER
    # One live call, on the other model; the stock service was not called again.
    assert len(fake_llm.requests_for(OTHER)) == 1
    assert len(fake_llm.requests_for(MODEL)) == 3
    assert len(received) == 1
    # Only the new call is billed: in the task's records, its usage and the tenant's report.
    new_cost = price_in * 400 + price_out * 10
    [record] = fork_costs["items"]
    assert record["model"] == OTHER
    assert Decimal(record["cost_usd"]) == new_cost
    assert fork["usage"]["llm_calls"] == 1
    assert Decimal(fork["usage"]["total_cost_usd"]) == new_cost
    assert report.status_code == 200, report.text
    by_task = {group["key"]: group for group in report.json()["groups"]}
    assert Decimal(by_task[fork["id"]]["cost_usd"]) == new_cost
    assert by_task[fork["id"]]["calls"] == 1
    assert Decimal(by_task[source["id"]]["cost_usd"]) == Decimal(source["usage"]["total_cost_usd"])


async def test_a_fork_may_not_start_between_a_call_and_its_result(
    service: Service, tenant: str
) -> None:
    async with stock_api() as (received, url):
        source = await recorded_task(service, tenant, received, url)
        async with service.client(tenant) as client:
            between = await client.post(f"/api/v1/tasks/{source['id']}/fork", json={"from_step": 3})
            beyond = await client.post(f"/api/v1/tasks/{source['id']}/fork", json={"from_step": 99})
            zero = await client.post(f"/api/v1/tasks/{source['id']}/fork", json={"from_step": 0})
            unknown_field = await client.post(
                f"/api/v1/tasks/{source['id']}/replay", json={"agents": "stocker"}
            )
    body = assert_invalid(between, "body.from_step")
    assert "fork from step 2" in body["errors"][0]["message"]
    assert "step 4 or later" in body["errors"][0]["message"]
    assert_invalid(beyond, "body.from_step")
    assert_invalid(zero, "body.from_step")
    assert_invalid(unknown_field, "body.agents")


async def test_replays_and_forks_are_checked_for_tenant_role_and_state(
    service: Service, tenant: str, other_tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("Done.", delay_s=30))
    async with service.client(tenant) as client:
        running = (await client.post("/api/v1/tasks", json={"input": "Wait."})).json()
        await fake.wait_for_requests(1, MODEL)
        unfinished = await client.post(f"/api/v1/tasks/{running['task_id']}/replay", json={})
        assert_problem(unfinished, 409, "task-unfinished")
        cancelled = await client.post(f"/api/v1/tasks/{running['task_id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
    for path in [f"{running['task_id']}/replay", f"{running['task_id']}/fork", f"{uuid4()}/replay"]:
        body = {"from_step": 1} if path.endswith("fork") else {}
        async with service.client(other_tenant) as stranger:
            response = await stranger.post(f"/api/v1/tasks/{path}", json=body)
        assert_problem(response, 404, "not-found")
        assert running["task_id"] not in response.text or path.startswith(running["task_id"])
    async with service.client(tenant, roles=("viewer",)) as viewer:
        refused = await viewer.post(f"/api/v1/tasks/{running['task_id']}/replay", json={})
    assert_problem(refused, 403, "forbidden")


async def test_erasing_a_task_erases_its_replays_which_hold_copies_of_its_steps(
    service: Service, tenant: str
) -> None:
    async with stock_api() as (received, url):
        source = await recorded_task(service, tenant, received, url)
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        replay = await run_to_end(
            admin, await admin.post(f"/api/v1/tasks/{source['id']}/replay", json={})
        )
        again = await run_to_end(
            admin, await admin.post(f"/api/v1/tasks/{replay['id']}/replay", json={})
        )
        assert again["replay_report"]["reproduced"] is True
        erased = await admin.delete(f"/api/v1/tasks/{source['id']}")
        assert erased.status_code == 204, erased.text
        for task in (source, replay, again):
            gone = await admin.get(f"/api/v1/tasks/{task['id']}")
            assert_problem(gone, 404, "not-found")
        audit = await admin.get(f"/api/v1/tenants/{tenant}/audit", params={"action": "task.erase"})
    [row] = audit.json()["items"]
    assert sorted(row["details"]["task_ids"]) == sorted([source["id"], replay["id"], again["id"]])
