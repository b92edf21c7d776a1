"""Costs by strategy through the running service: every call's cost record names the strategy
that made it — an `auto` task's assessment `auto`'s, each strategy it ran or fell back to its
own — and the tenant's cost reports group and split by it; a tenant's model policy can keep
`auto` from spending a call on the assessment at all."""

import json
from typing import Any

import httpx

from tests.api.helpers import configure, define_agent, stream, submit
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

AUDITOR = ("auditor",)


async def _finished(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    accepted = await submit(client, **body)
    events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed", events[-2].json
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    return task


def _by_key(report: dict[str, Any]) -> dict[Any, tuple[int, int, int]]:
    return {
        (group["key"], group["split"]) if group.get("split") else group["key"]: (
            group["calls"],
            group["input_tokens"],
            group["output_tokens"],
        )
        for group in report["groups"]
    }


async def test_reports_group_and_split_by_the_strategy_that_made_each_call(
    service: Service, tenant: str, other_tenant: str
) -> None:
    fake = service.fake_llm
    # `auto` scores the task (0.5: cot), cot answers less sure than the agent's 0.9, the run
    # falls back to direct; a plain task runs ReAct. Each call's usage is its own.
    fake.script(
        MODEL,
        Reply.text(
            json.dumps({"complexity": 0.5, "reason": "a few steps"}),
            prompt_tokens=101,
            completion_tokens=11,
        ),
        Reply.text(
            "It may be 7.\nConfidence: 0.4\nAnswer: 7", prompt_tokens=202, completion_tokens=22
        ),
        Reply.text("7", prompt_tokens=303, completion_tokens=33),
        Reply.text("Hello.", prompt_tokens=404, completion_tokens=44),
    )
    await define_agent(service, tenant, "thinker", kind="auto", strategy={"min_confidence": 0.9})
    async with service.client(tenant, sub="ann") as client:
        auto_task = await _finished(client, input="What is 3+4?", agent="thinker")
        await _finished(client, input="Say hello")
        task_costs = (await client.get(f"/api/v1/tasks/{auto_task['id']}/costs")).json()
        chain = (await client.get(f"/api/v1/tasks/{auto_task['id']}/chain")).json()
    fake.script(MODEL, Reply.text("Theirs.", prompt_tokens=9_999, completion_tokens=999))
    async with service.client(other_tenant, sub="eve") as eve:
        await _finished(eve, input="Say hello", kind="direct")
    async with service.client(tenant, sub="ada", roles=AUDITOR) as auditor:
        url = f"/api/v1/tenants/{tenant}/costs"
        by_strategy = (await auditor.get(url, params={"group_by": "strategy"})).json()
        by_agent = (
            await auditor.get(url, params={"group_by": "agent", "split_by": "strategy"})
        ).json()
        csv = await auditor.get(
            url, params={"group_by": "strategy"}, headers={"Accept": "text/csv"}
        )

    assert auto_task["answer"] == "7"
    fallbacks = [
        step["thinking"]["detail"]
        for step in chain["steps"]
        if step["type"] == "thinking" and step["thinking"].get("event") == "strategy_fallback"
    ]
    assert [(f["from"], f["to"]) for f in fallbacks] == [("cot", "direct")]
    assert [item["strategy"] for item in task_costs["items"]] == ["auto", "cot", "direct"]
    assert by_strategy["group_by"] == "strategy"
    assert _by_key(by_strategy) == {
        "auto": (1, 101, 11),
        "cot": (1, 202, 22),
        "direct": (1, 303, 33),
        "react": (1, 404, 44),
    }
    assert (by_strategy["totals"]["calls"], by_strategy["totals"]["input_tokens"]) == (4, 1010)
    assert _by_key(by_agent) == {
        ("thinker", "auto"): (1, 101, 11),
        ("thinker", "cot"): (1, 202, 22),
        ("thinker", "direct"): (1, 303, 33),
        ("default", "react"): (1, 404, 44),
    }
    assert csv.status_code == 200
    assert csv.text.splitlines()[0].startswith("strategy,calls,")
    assert [line.split(",")[0] for line in csv.text.splitlines()[1:]] == [
        "auto",
        "cot",
        "direct",
        "react",
        "TOTAL",
    ]
    fake.verify()


async def test_a_tenants_policy_has_auto_assess_by_the_heuristic_without_a_call(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    await configure(service, tenant, "models", {"complexity_assessment": "heuristic"})
    # The agent's own definition asks for the model's assessment: the tenant's policy wins.
    await define_agent(
        service, tenant, "chooser", kind="auto", strategy={"auto": {"assess": "model"}}
    )
    fake.script(MODEL, Reply.text("Paris."))
    async with service.client(tenant) as client:
        task = await _finished(client, input="What is the capital of France?", agent="chooser")
        chain = (await client.get(f"/api/v1/tasks/{task['id']}/chain")).json()
        costs = (await client.get(f"/api/v1/tasks/{task['id']}/costs")).json()

    [request] = fake.requests_for(MODEL)  # the answer's call alone
    assert "Rate how complex" not in json.dumps(request.body)
    [assessed] = [
        step["thinking"]["detail"]
        for step in chain["steps"]
        if step["type"] == "thinking" and step["thinking"].get("event") == "complexity_assessed"
    ]
    assert assessed["method"] == "heuristic"
    # A short question scores low: the default table runs it `direct`.
    assert [item["strategy"] for item in costs["items"]] == ["direct"]
    assert task["answer"] == "Paris."
    fake.verify()
