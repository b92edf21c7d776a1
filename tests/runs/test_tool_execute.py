"""`tool:execute` is checked for every run: a caller whose roles do not grant it gets the model
alone — no tool offered, a forced call refused — and a task naming a tool is refused."""

import pytest

from app.runs.errors import ToolsNotPermitted
from app.runs.models import RunPolicy, TaskSubmission
from app.security import Principal
from tests.api.helpers import stream
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


async def _policy(service: Service, tenant: str, *, executes_tools: bool) -> RunPolicy:
    record = await service.state.tenants.get(tenant)
    assert record is not None
    return RunPolicy(
        roles=frozenset({"member"}),
        enabled_tools=record.enabled_tools,
        tools=await service.state.toolbox.for_tenant(record),
        executes_tools=executes_tools,
    )


async def test_a_caller_without_tool_execute_gets_no_tool(service: Service, tenant: str) -> None:
    principal = Principal(subject="bot", tenant_id=tenant, roles=frozenset({"member"}))
    policy = await _policy(service, tenant, executes_tools=False)
    with pytest.raises(ToolsNotPermitted) as refused:
        service.state.runs.validate(TaskSubmission(input="2+2?", tools=["calculator"]), policy)
    assert "tool:execute" in refused.value.problems[0].message

    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "2+2"}, id="c1")]),
        Reply.text("4, by heart."),
    )
    submitted = await service.state.runs.submit(principal, TaskSubmission(input="2+2?"), policy)
    async with service.client(tenant, sub="bot") as client:
        events = await stream(client, str(submitted.task_id))
    first = service.fake_llm.requests_for(MODEL)[0].body
    assert not first.get("tools")
    results = [
        e.json["step"]["tool_result"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
    ]
    refusals = [r for r in results if not r["success"]]
    assert [r["error_code"] for r in refusals] == ["unknown_tool"]
    assert events[-1].json["final_state"] == "completed"


async def test_a_caller_with_tool_execute_is_offered_its_tenants_tools(
    service: Service, tenant: str
) -> None:
    principal = Principal(subject="bot", tenant_id=tenant, roles=frozenset({"member"}))
    policy = await _policy(service, tenant, executes_tools=True)
    service.fake_llm.script(MODEL, Reply.text("Nothing to compute."))
    submitted = await service.state.runs.submit(principal, TaskSubmission(input="Hi"), policy)
    async with service.client(tenant, sub="bot") as client:
        await stream(client, str(submitted.task_id))
    offered = {t["function"]["name"] for t in service.fake_llm.requests_for(MODEL)[0].body["tools"]}
    assert offered == {"calculator", "current_time"}
