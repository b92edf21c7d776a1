"""A plan waits for a human mid-plan and goes on where it stopped: a wave with a tool step that
needs approval is held whole (its reasoning step's call is not made either), the run is
suspended with nothing of it live, and the decision resumes it wave by wave from its stored
steps — the plan and the finished wave not asked or billed again."""

import asyncio
import json
from typing import Any
from uuid import UUID

from tests.api.helpers import configure, result_of, stream, submit, until_event
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

PLAN = {
    "steps": [
        {"id": "rate", "description": "find the rate", "strategy": "direct"},
        {
            "id": "multiply",
            "type": "tool",
            "description": "multiply by the rate",
            "tool": "calculator",
            "arguments": {"expression": "6 * 7"},
            "depends_on": ["rate"],
            "estimated_calls": 0,
        },
        {
            "id": "check",
            "description": "check the rate",
            "strategy": "direct",
            "depends_on": ["rate"],
        },
    ]
}


def _events(chain: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [
        step["thinking"]["detail"] or {}
        for step in chain["steps"]
        if step["type"] == "thinking" and step["thinking"].get("event") == name
    ]


def _asked(service: Service) -> list[str]:
    """What each request at the fake asked for: the plan, a step, or the answer."""
    asked = []
    for request in service.fake_llm.requests_for(MODEL):
        text = "\n".join(str(m["content"]) for m in request.body["messages"])
        if "Plan how to do the task" in text:
            asked.append("plan")
        elif "This step: " in text:
            asked.append(text.split("This step: ")[1].split("\n")[0])
        else:
            asked.append("answer")
    return asked


async def test_a_plan_waiting_for_approval_mid_plan_resumes_without_repeating_a_step(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    await configure(service, tenant, "approvals", {"tools": {"calculator": "always"}})
    fake.script_matching(MODEL, ("Plan how to do the task",), Reply.text(json.dumps(PLAN)))
    fake.script_matching(MODEL, ("This step: find the rate",), Reply.text("the rate is 7"))
    fake.script_matching(MODEL, ("This step: check the rate",), Reply.text("7 is right"))
    fake.script_matching(MODEL, ("Results of the plan's steps",), Reply.text("42"))
    admin = service.client(tenant, sub="root", roles=("tenant_admin",))
    async with service.client(tenant) as alice, admin:
        task_id = (await submit(alice, input="What is 6 times the rate?", kind="plan"))["task_id"]
        await until_event(alice, task_id, "task_status", state="input_required")
        await asyncio.wait_for(service.state.runs.left(UUID(task_id)), 10)
        asked_before = _asked(service)
        [approval] = (await alice.get(f"/api/v1/tasks/{task_id}/approvals")).json()["items"]
        decided = await admin.post(
            f"/api/v1/tasks/{task_id}/approvals/{approval['id']}", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        events = await stream(alice, task_id)
        task = (await alice.get(f"/api/v1/tasks/{task_id}")).json()
        chain = (await alice.get(f"/api/v1/tasks/{task_id}/chain")).json()
        costs = (await alice.get(f"/api/v1/tasks/{task_id}/costs")).json()

    # Suspended after the first wave: the second wave's reasoning call held with the tool's.
    assert asked_before == ["plan", "find the rate"]
    assert (approval["tool"], approval["arguments"]) == ("calculator", {"expression": "6 * 7"})
    assert events[-1].json["final_state"] == "completed"
    assert (task["status"], task["answer"]) == ("completed", "42")
    # Resumed: the plan and the finished step were not asked again, each call made once.
    assert _asked(service) == ["plan", "find the rate", "check the rate", "answer"]
    assert "42" in json.dumps(result_of(chain, "calculator")["result"])
    # The plan's records are the run's, once each, across the suspension.
    assert len(_events(chain, "plan_created")) == 1
    assert sorted(d["step"] for d in _events(chain, "plan_step_started")) == [
        "check",
        "multiply",
        "rate",
    ]
    assert sorted(d["step"] for d in _events(chain, "plan_step_completed")) == [
        "check",
        "multiply",
        "rate",
    ]
    assert len(_events(chain, "plan_completed")) == 1
    # One cost record per model call, all of them the plan's.
    assert len(costs["items"]) == 4
    assert len({item["step_id"] for item in costs["items"]}) == 4
    assert {item["strategy"] for item in costs["items"]} == {"plan"}
    fake.verify()
