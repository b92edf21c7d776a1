"""Sandbox time billed and bounded like model calls, in real sandboxes through the running
service: each sandbox call's CPU seconds are on its step and its cost record (priced per the
deployment's setting, exact decimals), the cost reports sum them, a call stopped at its limit
is billed all the same, and a task's `max_sandbox_s` refuses the call after they are used."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from tests.api.helpers import configure, define_agent, stream, submit
from tests.api.tools import BUILTIN_TOOLS
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, running_service, service_settings

PRICE = Decimal("0.0004")  # USD per CPU second
# About 0.3 CPU seconds, measured by the process itself.
BURN = (
    "python3 -c 'import time\n"
    "start = time.process_time()\n"
    "while time.process_time() - start < 0.3: pass'"
)


async def _task(client: httpx.AsyncClient, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    accepted = await submit(client, **body)
    await stream(client, accepted["task_id"])
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    chain: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}/chain")).json()
    return task, chain


async def test_sandbox_seconds_are_billed_reported_and_bounded_by_the_tasks_budget(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    settings = service_settings(
        service_dir, database_url, fake_llm, sandbox_cpu_second_usd=PRICE, sandbox_cpu_s=1
    )
    fake_llm.script(
        MODEL,
        # The first task: a call that burns, then one stopped at its CPU limit, then the answer.
        Reply.tool_calls([ToolCall("run_shell", {"command": BURN})]),
        Reply.tool_calls([ToolCall("run_shell", {"command": "while true; do :; done"})]),
        Reply.text("Done."),
        # The second, with a budget of 0.2 CPU seconds: the first call uses them up, the
        # next is refused.
        Reply.tool_calls([ToolCall("run_shell", {"command": BURN})]),
        Reply.tool_calls([ToolCall("run_shell", {"command": "echo never"})]),
    )
    async with running_service(settings, fake_llm) as service:
        tenant = await service.create_tenant("metered")
        tools = [*BUILTIN_TOOLS, "run_shell"]
        await configure(service, tenant, "tools", {"enabled_tools": tools})
        await define_agent(service, tenant, "worker", tools=["run_shell"])
        async with service.client(tenant, sub="ann") as client:
            task, chain = await _task(client, input="Burn some CPU.", agent="worker")
            costs = (await client.get(f"/api/v1/tasks/{task['id']}/costs")).json()
            bounded, bounded_chain = await _task(
                client, input="Burn again.", agent="worker", budget={"max_sandbox_s": 0.2}
            )
        async with service.client(tenant, sub="ada", roles=("auditor",)) as auditor:
            report = (
                await auditor.get(f"/api/v1/tenants/{tenant}/costs", params={"group_by": "tool"})
            ).json()

    calls = [s for s in chain["steps"] if s["type"] == "tool_result"]
    burnt, stopped = [
        s["tool_result"] for s in calls if s["tool_result"]["tool_name"] == "run_shell"
    ]
    assert burnt["success"]
    assert 0.25 <= burnt["sandbox_s"] <= 1.0
    assert not stopped["success"]
    assert "CPU-time limit" in stopped["error"]
    # Billed though it failed: the second of CPU its limit allowed (as /proc rounds it).
    assert stopped["sandbox_s"] >= 0.8
    sandbox_records = [item for item in costs["items"] if item["tool_name"] == "run_shell"]
    assert [Decimal(item["sandbox_s"]) for item in sandbox_records] == [
        Decimal(str(burnt["sandbox_s"])),
        Decimal(str(stopped["sandbox_s"])),
    ]
    for item in sandbox_records:
        assert Decimal(item["cost_usd"]) == Decimal(item["sandbox_s"]) * PRICE
    assert chain["metrics"]["sandbox_s"] == round(burnt["sandbox_s"] + stopped["sandbox_s"], 3)

    assert bounded["status"] == "failed"
    assert bounded["error_code"] == "budget_exceeded"
    refused = [
        s["tool_result"]
        for s in bounded_chain["steps"]
        if s["type"] == "tool_result" and s["tool_result"]["tool_name"] == "run_shell"
    ]
    assert refused[0]["success"]
    assert refused[1]["error_code"] == "budget_exceeded"
    assert "max_sandbox_s" in refused[1]["error"]
    assert "never" not in str(refused[1])

    [group] = [g for g in report["groups"] if g["key"] == "run_shell"]
    spent = [*sandbox_records, refused[0]]
    seconds = sum(Decimal(str(item["sandbox_s"])) for item in spent)
    assert Decimal(group["sandbox_s"]) == seconds
    assert Decimal(group["cost_usd"]) == seconds * PRICE
    assert Decimal(report["totals"]["sandbox_s"]) == seconds
    assert group["calls"] == 3
