"""`on_limit: answer` through the running service: a task whose agent reaches a limit ends
`incomplete`, its `result` the answer of one last tool-less call and its `stop_reason` the
limit's name, on the task, on `chain_completed` and in `done`; a cost budget is never crossed.
With `on_limit: fail` a limit fails the task as it always did."""

from decimal import Decimal
from typing import Any

from tests.api.helpers import cost_of, define_agent, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import SSE

ANSWER = "From what I found so far: 17 * 23 = 391."
WORK = Reply.tool_calls(
    [ToolCall("calculator", {"expression": "17 * 23"})], prompt_tokens=50, completion_tokens=900
)
FINAL = Reply.text(ANSWER, prompt_tokens=60, completion_tokens=100)


async def _run(
    service: Service, tenant: str, agent: str, **body: Any
) -> tuple[dict[str, Any], list[SSE]]:
    async with service.client(tenant) as client:
        accepted = await submit(client, input="What is 17 * 23, and why?", agent=agent, **body)
        events = await stream(client, accepted["task_id"])
        response = await client.get(f"/api/v1/tasks/{accepted['task_id']}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task, events


def _assert_incomplete(task: dict[str, Any], events: list[SSE], reason: str) -> None:
    assert task["status"] == "incomplete"
    assert task["result"] == ANSWER
    assert task["stop_reason"] == reason
    assert task["error_code"] is None
    [completed] = [e.json for e in events if e.event == "chain_completed"]
    assert (completed["answer"], completed["stop_reason"]) == (ANSWER, reason)
    assert events[-1].event == "done"
    assert events[-1].json["final_state"] == "incomplete"


async def test_at_max_iterations_the_task_ends_incomplete_with_the_final_answer(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "bounded", max_iterations=2, on_limit="answer")
    service.fake_llm.script(MODEL, WORK, WORK, FINAL)

    task, events = await _run(service, tenant, "bounded")

    _assert_incomplete(task, events, "max_iterations")
    requests = service.fake_llm.requests_for(MODEL)
    assert len(requests) == 3
    assert "tools" in requests[1].body
    assert "tools" not in requests[2].body
    assert "all 2 iterations" in requests[2].body["messages"][-1]["content"]
    assert Decimal(task["usage"]["total_cost_usd"]) == 2 * cost_of(50, 900) + cost_of(60, 100)
    metrics = service.state.runs.metrics.render().decode()
    assert (
        f'omniforge_incomplete_runs_total{{model="{MODEL}",stop_reason="max_iterations",'
        f'tenant="{tenant}"}} 1.0'
    ) in metrics


async def test_with_on_limit_fail_max_iterations_fails_the_task(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "bounded", max_iterations=2)
    service.fake_llm.script(MODEL, WORK, WORK)

    task, events = await _run(service, tenant, "bounded")

    assert task["status"] == "failed"
    assert task["error_code"] == "max_iterations"
    assert (task["result"], task["stop_reason"]) == (None, None)
    assert events[-1].json["final_state"] == "failed"
    assert len(service.fake_llm.requests_for(MODEL)) == 2


async def test_at_a_cost_budget_the_task_ends_incomplete_within_the_budget(
    service: Service, tenant: str
) -> None:
    """Each ordinary call may cost about $0.0024 at worst and costs $0.00185; the final call is
    kept back at about $0.0019. After two calls a third and the final one would not fit in
    $0.007, so the third call is the final one."""
    await define_agent(service, tenant, "frugal", on_limit="answer", max_output_tokens=1000)
    service.fake_llm.script(MODEL, WORK, WORK, FINAL)
    budget = Decimal("0.007")

    task, events = await _run(service, tenant, "frugal", budget={"max_cost_usd": str(budget)})

    _assert_incomplete(task, events, "max_cost_usd")
    requests = service.fake_llm.requests_for(MODEL)
    assert len(requests) == 3
    assert "tools" not in requests[-1].body
    assert "cost budget" in requests[-1].body["messages"][-1]["content"]
    spent = Decimal(task["usage"]["total_cost_usd"])
    assert spent == 2 * cost_of(50, 900) + cost_of(60, 100)
    assert spent <= budget
    async with service.client(tenant) as client:
        chain = (await client.get(f"/api/v1/tasks/{task['id']}/chain")).json()
    assert chain["status"] == "incomplete"
    assert Decimal(chain["metrics"]["total_cost_usd"]) == spent


async def test_at_the_same_cost_budget_on_limit_fail_fails_budget_exceeded(
    service: Service, tenant: str
) -> None:
    await define_agent(service, tenant, "frugal", max_output_tokens=1000)
    service.fake_llm.script(MODEL, WORK, WORK, WORK)
    budget = Decimal("0.007")

    task, events = await _run(service, tenant, "frugal", budget={"max_cost_usd": str(budget)})

    assert task["status"] == "failed"
    assert task["error_code"] == "budget_exceeded"
    assert task["stop_reason"] is None
    # Three calls fit; the fourth is refused before it is made.
    assert len(service.fake_llm.requests_for(MODEL)) == 3
    assert Decimal(task["usage"]["total_cost_usd"]) == 3 * cost_of(50, 900) <= budget
    assert events[-1].json["final_state"] == "failed"
