"""A run that waits for a human holds nothing in any process: every instance may stop, and a
decision given to any instance started afterwards resumes it from its stored steps."""

import asyncio
import json
import re
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import result_of, stream, submit, until_event
from tests.api.test_cluster import assert_whole
from tests.cluster import Instance, cluster
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)


async def live_runs(instance: Instance) -> float:
    async with httpx.AsyncClient(base_url=instance.base_url) as client:
        text = (await client.get("/metrics")).text
    match = re.search(r"^omniforge_active_runs (\S+)$", text, re.MULTILINE)
    assert match is not None, text[:2000]
    return float(match[1])


async def no_live_run(instance: Instance) -> float:
    """The instance's live runs once none is left, or what it still has after 5 s. A run
    leaves just after its last events are stored, and another instance may show them first:
    nothing tells this process when the gauge moves, so it is read until it does."""
    deadline = asyncio.get_running_loop().time() + 5
    for _ in range(100):
        live = await live_runs(instance)
        if live == 0 or asyncio.get_running_loop().time() > deadline:
            return live
        await asyncio.sleep(0.05)
    return await live_runs(instance)


async def test_a_waiting_run_survives_every_instance_restarting_and_resumes_on_approval(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text("done"),
    )
    async with cluster(own_database_url, tmp_path, fake_llm) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        admin_token = group.token_for("root", ("tenant_admin",))
        async with a.client(admin_token) as admin:
            ruled = await admin.put(
                f"/api/v1/tenants/{group.tenant}/approvals",
                json={"tools": {"calculator": "always"}},
            )
            assert ruled.status_code == 200, ruled.text
        async with a.client(group.token) as on_a, b.client(group.token) as on_b:
            task_id = (await submit(on_a))["task_id"]
            waited = await until_event(on_b, task_id, "task_status", state="input_required")
            [asked] = [e.json for e in waited if e.event == "approval_required"]
            # Nothing of the run is live anywhere while it waits.
            assert await no_live_run(a) == 0
            assert await no_live_run(b) == 0
        # Every instance stops; new ones start.
        assert await a.terminate() in (0, -15)
        assert await b.terminate() in (0, -15)
        c = await group.instance("c")
        d = await group.instance("d")
        async with c.client(group.token) as on_c, d.client(admin_token) as admin_d:
            task = (await on_c.get(f"/api/v1/tasks/{task_id}")).json()
            assert task["status"] == "input_required"
            decided = await admin_d.post(
                f"/api/v1/tasks/{task_id}/approvals/{asked['approval_id']}",
                json={"decision": "approve", "arguments": {"expression": "6 * 8"}},
            )
            assert decided.status_code == 200, decided.text
            events = await stream(on_c, task_id)
            chain = (await on_c.get(f"/api/v1/tasks/{task_id}/chain")).json()

    assert_whole(events, "completed")
    types = [e.event for e in events]
    assert [e.json.get("resumed") for e in events if e.event == "task_status"] == [
        None,
        None,
        True,
    ]
    assert types.count("approval_required") == 1
    [decision] = [e.json for e in events if e.event == "approval_decided"]
    assert decision["decision"] == "approved"
    assert decision["decided_by"] == "root"
    # The tool got the edited arguments; the stored first LLM call was not made again.
    assert "48" in json.dumps(result_of(chain, "calculator")["result"])
    assert len(fake_llm.requests) == 2
