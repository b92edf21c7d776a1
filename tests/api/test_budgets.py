"""Hard task budgets through the running service: a run stops `budget_exceeded` naming the
limit before the call that would cross it, with its partial chain and costs kept; every step
carries what remains; `budget_warning` arrives once; tenants' default budgets apply."""

from decimal import Decimal
from typing import Any

from tests.api.helpers import configure, cost_of, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, OUTPUT_PRICE, Service
from tests.sse import SSE


def _calculation(prompt_tokens: int = 11, completion_tokens: int = 7) -> Reply:
    return Reply.tool_calls(
        [ToolCall("calculator", {"expression": "2 + 2"})],
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def _steps(events: list[SSE]) -> list[dict[str, Any]]:
    return [e.json for e in events if e.event == "reasoning_step"]


def _failure(events: list[SSE]) -> dict[str, Any]:
    [failed] = [e.json for e in events if e.event == "chain_failed"]
    return failed  # type: ignore[no-any-return]


async def test_max_llm_calls_1_stops_after_exactly_one_llm_call(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, _calculation())  # the run never gets to ask for an answer
    async with service.client(tenant) as client:
        accepted = await submit(client, budget={"max_llm_calls": 1})
        events = await stream(client, accepted["task_id"])
        task = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
        chain = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()

    assert len(fake.requests_for(MODEL)) == 1
    failed = _failure(events)
    assert failed["error_code"] == "budget_exceeded"
    assert failed["details"]["limit"] == "max_llm_calls"
    assert failed["details"]["limit_value"] == 1
    assert "max_llm_calls (1)" in failed["error_message"]
    assert events[-1].json["final_state"] == "failed"
    steps = _steps(events)
    results = [s["step"]["tool_result"] for s in steps if s["step"]["tool_result"]]
    # the LLM call, the calculator, and the refused second LLM call
    assert [r["success"] for r in results] == [True, True, False]
    assert results[-1]["error_code"] == "budget_exceeded"
    assert results[0]["cost_usd"] == str(cost_of(11, 7))
    # the partial chain and its cost are kept
    assert task["status"] == "failed"
    assert task["error_code"] == "budget_exceeded"
    assert task["budget"]["max_llm_calls"] == 1
    assert Decimal(chain["metrics"]["total_cost_usd"]) == cost_of(11, 7)
    assert len(chain["steps"]) == len(steps)


async def test_every_step_carries_the_remaining_budget(service: Service, tenant: str) -> None:
    fake = service.fake_llm
    fake.script(
        MODEL, _calculation(100, 20), Reply.text("4", prompt_tokens=150, completion_tokens=5)
    )
    budget = {"max_llm_calls": 5, "max_steps": 40, "max_tokens": 100_000, "max_cost_usd": "1"}
    async with service.client(tenant) as client:
        accepted = await submit(client, budget=budget)
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()

    assert events[-1].json["final_state"] == "completed"
    steps = _steps(events)
    assert steps
    for event in steps:
        metrics = event["metrics"]
        remaining = metrics["remaining_budget"]
        assert remaining["llm_calls"] == 5 - metrics["llm_calls"]
        assert remaining["steps"] == 40 - metrics["total_steps"]
        assert remaining["tokens"] == 100_000 - metrics["total_tokens"]
        assert Decimal(remaining["cost_usd"]) == 1 - Decimal(metrics["total_cost_usd"])
        assert remaining["duration_s"] is None  # no duration budget
    # stored with the chain, not only streamed
    final = chain["metrics"]["remaining_budget"]
    assert Decimal(final["cost_usd"]) == 1 - cost_of(100, 20) - cost_of(150, 5)
    assert final["tokens"] == 100_000 - (100 + 20 + 150 + 5)


async def test_a_cost_budget_stops_before_the_call_whose_estimate_would_cross_it(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    # Each call may write up to llm_max_output_tokens: that alone is most of the estimate.
    output_cap = service.settings.llm_max_output_tokens
    cap_cost = Decimal(OUTPUT_PRICE) * output_cap
    first_cost = cost_of(1_000, 600)
    limit = cap_cost + first_cost / 2  # room for one call's estimate, not for two calls
    fake.script(MODEL, _calculation(1_000, 600))
    async with service.client(tenant) as client:
        accepted = await submit(client, budget={"max_cost_usd": str(limit)})
        events = await stream(client, accepted["task_id"])

    assert len(fake.requests_for(MODEL)) == 1
    failed = _failure(events)
    assert failed["error_code"] == "budget_exceeded"
    details = failed["details"]
    assert details["limit"] == "max_cost_usd"
    assert Decimal(details["limit_value"]) == limit
    assert Decimal(details["used"]) == first_cost
    estimate = Decimal(details["estimate"])
    assert estimate >= cap_cost  # the whole output cap is assumed
    assert first_cost + estimate > limit
    assert Decimal(failed["metrics"]["total_cost_usd"]) == first_cost


async def test_a_budget_no_call_fits_stops_before_the_first_call(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        accepted = await submit(client, budget={"max_tokens": 50})
        events = await stream(client, accepted["task_id"])

    assert service.fake_llm.requests_for(MODEL) == []
    failed = _failure(events)
    assert failed["details"]["limit"] == "max_tokens"
    assert failed["details"]["used"] == 0
    assert failed["details"]["estimate"] > 50


async def test_budget_warning_arrives_once_when_a_budget_is_80_percent_used(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, _calculation(), _calculation(), _calculation(), _calculation())
    fake.script(MODEL, Reply.text("done"))
    async with service.client(tenant) as client:
        accepted = await submit(client, budget={"max_llm_calls": 5})
        events = await stream(client, accepted["task_id"])

    assert events[-1].json["final_state"] == "completed"
    warnings = [e for e in events if e.event == "budget_warning"]
    assert len(warnings) == 1
    [warning] = warnings
    assert warning.json["limits"] == ["max_llm_calls"]
    assert warning.json["budget"]["max_llm_calls"] == 5
    # it follows the step that made 4 of 5 LLM calls (80 %), and only that one
    position = events.index(warning)
    before = [e for e in events[:position] if e.event == "reasoning_step"]
    assert before[-1].json["metrics"]["llm_calls"] == 4
    assert all(e.json["metrics"]["llm_calls"] < 4 for e in before[:-1])
    assert warning.json["metrics"]["remaining_budget"]["llm_calls"] == 1


async def test_max_duration_stops_a_run_in_the_middle_of_a_call(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, _calculation(), Reply.text("late", delay_s=30))
    async with service.client(tenant) as client:
        accepted = await submit(client, budget={"max_duration_s": 1.0})
        events = await stream(client, accepted["task_id"])
        chain = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()

    failed = _failure(events)
    assert failed["error_code"] == "budget_exceeded"
    assert failed["details"] == {"limit": "max_duration_s", "limit_value": 1.0}
    assert len(fake.requests_for(MODEL)) == 2  # the second was cut short
    assert [e.json["limits"] for e in events if e.event == "budget_warning"] == [["max_duration_s"]]
    # what happened before is kept: the first call, the calculator, the cut call
    assert chain["metrics"]["llm_calls"] == 2
    assert chain["status"] == "failed"


async def test_the_tenants_default_budget_applies_and_a_tasks_own_limits_win(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    quotas = await configure(
        service, tenant, "quotas", {"default_budget": {"max_llm_calls": 1, "max_steps": 50}}
    )
    assert quotas["default_budget"]["max_llm_calls"] == 1

    fake.script(MODEL, _calculation())
    fake.script(MODEL, _calculation(), Reply.text("4"))
    async with service.client(tenant) as client:
        limited = await submit(client)
        limited_events = await stream(client, limited["task_id"])
        own = await submit(client, budget={"max_llm_calls": 2})
        own_events = await stream(client, own["task_id"])
        own_task = (await client.get(f"/api/v1/tasks/{own['task_id']}")).json()

    assert _failure(limited_events)["details"]["limit"] == "max_llm_calls"
    assert own_events[-1].json["final_state"] == "completed"
    # the task's own limit, the tenant's default for what it left unset
    assert own_task["budget"]["max_llm_calls"] == 2
    assert own_task["budget"]["max_steps"] == 50
