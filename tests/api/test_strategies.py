"""Strategies through the service: a task may name its own (`kind`), an agent's definition
holds its strategy and the strategy's options, and a search's tree reaches the stream and the
stored chain as structured thoughts."""

import json
from typing import Any

import httpx
import pytest

from tests.api.helpers import assert_invalid, define_agent, stream, submit
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

ADMIN = ("tenant_admin",)


async def _finished(client: httpx.AsyncClient, **body: Any) -> tuple[dict[str, Any], list[Any]]:
    """Submits a task, reads its stream to the end; the task as stored and its steps' events."""
    accepted = await submit(client, **body)
    events = await stream(client, accepted["task_id"])
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    steps = [event.json["step"] for event in events if event.event == "reasoning_step"]
    return task, steps


async def test_a_task_runs_the_strategy_it_names(service: Service, tenant: str) -> None:
    service.fake_llm.script(MODEL, Reply.text("3+4 is 7, times 12.\nConfidence: 0.8\nAnswer: 84"))
    async with service.client(tenant) as client:
        task, steps = await _finished(client, input="What is 12*(3+4)?", kind="cot")
        chain = (await client.get(f"/api/v1/tasks/{task['id']}/chain")).json()
    assert (task["status"], task["answer"]) == ("completed", "84")
    [request] = service.fake_llm.requests_for(MODEL)
    assert "tools" not in request.body
    assert [step["type"] for step in steps] == ["tool_call", "tool_result", "thinking", "synthesis"]
    assert steps[2]["thinking"] == {"thought": "3+4 is 7, times 12.", "confidence": 0.8}
    assert [step["id"] for step in chain["steps"]] == [step["id"] for step in steps]
    service.fake_llm.verify()


async def test_an_agents_tree_of_thoughts_streams_and_stores_its_tree(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script_matching(
        MODEL, ("propose 2 different",), Reply.text(json.dumps({"thoughts": ["left", "right"]}))
    )
    fake.script_matching(MODEL, ("rate how likely", "1. left"), Reply.text('{"score": 0.3}'))
    fake.script_matching(MODEL, ("rate how likely", "1. right"), Reply.text('{"score": 0.7}'))
    fake.script_matching(MODEL, ("final answer to the task",), Reply.text("Go right."))
    options = {"tot": {"breadth": 2, "depth": 1, "beam": 1}}
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        created = await admin.post(
            "/api/v1/agents", json={"name": "searcher", "kind": "tot", "strategy": options}
        )
        assert created.status_code == 201, created.text
        assert created.json()["strategy"]["tot"] == options["tot"]
        task, steps = await _finished(admin, input="Which way?", agent="searcher")
        chain = (await admin.get(f"/api/v1/tasks/{task['id']}/chain")).json()
    assert (task["status"], task["answer"]) == ("completed", "Go right.")
    records = [
        (step["thinking"].get("event"), step["thinking"]["thought"])
        for step in steps
        if step["type"] == "thinking"
    ]
    assert records[:2] == [("thought", "left"), ("thought", "right")]
    assert [event for event, _ in records[2:]] == [
        "thought_scored",
        "thought_scored",
        "path_chosen",
    ]
    by_thought = {step["thinking"]["thought"]: step for step in steps if step["type"] == "thinking"}
    chosen = next(
        s for s in steps if s["type"] == "thinking" and s["thinking"].get("event") == "path_chosen"
    )
    assert chosen["thinking"]["detail"]["path"] == [by_thought["right"]["id"]]
    assert chosen["thinking"]["confidence"] == 0.7
    stored = [s for s in chain["steps"] if s["type"] == "thinking"]
    assert stored == [s for s in steps if s["type"] == "thinking"]
    fake.verify()


@pytest.mark.parametrize("kind", ["planner", "Not A Kind"])
async def test_a_task_naming_a_strategy_the_service_lacks_is_refused(
    service: Service, tenant: str, kind: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.post("/api/v1/tasks", json={"input": "Hi.", "kind": kind})
    body = assert_invalid(response, "body.kind")
    if kind == "planner":
        assert "available: auto, cot, direct, mcts, plan, react, tot" in json.dumps(body)
    assert service.fake_llm.requests_for(MODEL) == []


@pytest.mark.parametrize(
    "strategy",
    [
        {"tot": {"breadth": 0}},
        {"tot": {"depth": 9}},
        {"auto": {"table": [{"below": 0.5, "strategy": "cot"}]}},  # does not reach 1
        {
            "auto": {
                "table": [{"below": 1, "strategy": "cot"}, {"below": 0.5, "strategy": "direct"}]
            }
        },
        {"auto": {"table": [{"below": 1, "strategy": "auto"}]}},
        {"auto": {"assess": "guess"}},
        {"min_confidence": 2},
        {"beam": 2},
    ],
)
async def test_a_definition_with_unusable_strategy_options_is_refused(
    service: Service, tenant: str, strategy: dict[str, Any]
) -> None:
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        response = await admin.post(
            "/api/v1/agents", json={"name": "bad", "kind": "auto", "strategy": strategy}
        )
    assert_invalid(response, "body.strategy")


async def test_an_agents_strategy_options_change_in_a_new_version(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        await admin.post("/api/v1/agents", json={"name": "chooser", "kind": "auto"})
        patched = await admin.patch(
            "/api/v1/agents/chooser",
            json={"strategy": {"auto": {"assess": "heuristic"}, "min_confidence": 0.4}},
        )
        reset = await admin.patch("/api/v1/agents/chooser", json={"strategy": None})
    assert patched.status_code == 200, patched.text
    assert patched.json()["version"] == 2
    assert patched.json()["strategy"]["auto"]["assess"] == "heuristic"
    assert patched.json()["strategy"]["min_confidence"] == 0.4
    assert reset.json()["version"] == 3
    assert reset.json()["strategy"] is None


async def test_a_fallback_model_must_be_one_the_tenant_may_run(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=ADMIN) as admin:
        unknown = await admin.post(
            "/api/v1/agents", json={"name": "thrifty", "fallback_model": "no-such-model"}
        )
        known = await admin.post(
            "/api/v1/agents", json={"name": "thrifty", "kind": "auto", "fallback_model": MODEL}
        )
    assert "unknown model 'no-such-model'" in json.dumps(
        assert_invalid(unknown, "body.fallback_model")
    )
    assert known.status_code == 201, known.text
    assert known.json()["fallback_model"] == MODEL


async def test_a_plan_runs_a_sub_agent_step_beside_a_reasoning_step_and_streams_its_records(
    service: Service, tenant: str
) -> None:
    """A plan of three steps: a sub-agent's and a reasoning step in the first wave (one batch:
    the child task runs as any sub-agent call does), then a step building on both; the plan's
    records reach the stream and the stored chain in order, and the child is linked."""
    await define_agent(service, tenant, "researcher", description="Finds facts.", tools=[])
    await define_agent(service, tenant, "lead", kind="plan", tools=["agent:researcher"])
    fake = service.fake_llm
    plan = {
        "steps": [
            {
                "id": "facts",
                "description": "Find the boiling point",
                "type": "agent",
                "tool": "agent__researcher",
            },
            {"id": "units", "description": "Name the unit", "strategy": "direct"},
            {"id": "join", "description": "Put both together", "depends_on": ["facts", "units"]},
        ]
    }
    fake.script_matching(MODEL, ("Plan how to do the task",), Reply.text(json.dumps(plan)))
    fake.script_matching(MODEL, ("Find the boiling point",), Reply.text("100"))  # the child
    fake.script_matching(MODEL, ("This step: Name the unit",), Reply.text("degrees Celsius"))
    fake.script_matching(
        MODEL, ("This step: Put both together",), Reply.text("Thinking.\nAnswer: 100 °C")
    )
    fake.script_matching(
        MODEL, ("results of the plan's steps",), Reply.text("Water boils at 100 °C.")
    )
    async with service.client(tenant) as client:
        task, steps = await _finished(client, input="When does water boil?", agent="lead")
        chain = (await client.get(f"/api/v1/tasks/{task['id']}/chain")).json()
        [result] = [
            s["tool_result"]
            for s in chain["steps"]
            if s["tool_result"] and s["tool_result"]["tool_name"] == "agent__researcher"
        ]
        child = (await client.get(f"/api/v1/tasks/{result['child_task_id']}")).json()
    assert (task["status"], task["answer"]) == ("completed", "Water boils at 100 °C.")
    assert (child["status"], child["answer"], child["parent_task_id"]) == (
        "completed",
        "100",
        task["id"],
    )
    events = [
        (s["thinking"]["event"], (s["thinking"].get("detail") or {}).get("step"))
        for s in steps
        if s["type"] == "thinking"
    ]
    assert events == [
        ("plan_created", None),
        ("plan_step_started", "facts"),
        ("plan_step_started", "units"),
        ("plan_step_completed", "facts"),
        ("plan_step_completed", "units"),
        ("plan_step_started", "join"),
        ("plan_step_completed", "join"),
        ("plan_completed", None),
    ]
    join = next(r for r in fake.requests_for(MODEL) if "This step: Put both" in json.dumps(r.body))
    assert "[facts] 100" in join.body["messages"][-1]["content"]
    assert "[units] degrees Celsius" in join.body["messages"][-1]["content"]
    stored = [s for s in chain["steps"] if s["type"] == "thinking"]
    assert stored == [s for s in steps if s["type"] == "thinking"]
    fake.verify()
