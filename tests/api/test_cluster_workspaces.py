"""A workspace survives its instance: killed between two `run_code` calls, the run resumes on
another instance, which starts the sandbox again from the workspace's last snapshot: the files
the first call wrote are there, the first call is not made again, and the answer says the
Python session was started again (its variables are gone with the instance)."""

import asyncio
from pathlib import Path

import pytest

from tests.api.helpers import stream, submit
from tests.api.test_cluster import FAST_LEASE, assert_whole
from tests.cluster import cluster
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL
from tests.sse import read_sse

pytestmark = pytest.mark.parametrize("own_database_url", ["postgres"], indirect=True)

FIRST = "open('state.txt', 'w').write('kept by the first call')\nsession = 'live'"
SECOND = "print(open('state.txt').read())\n'session' in globals()"


async def test_a_run_killed_between_two_sandbox_calls_finds_its_workspace_on_another_instance(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    held = asyncio.Event()  # never set: the call dies with its instance
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("run_code", {"code": FIRST})]),
        Reply.text("lost", gate=held),
        Reply.tool_calls([ToolCall("run_code", {"code": SECOND})]),
        Reply.text("The file was kept."),
    )
    async with cluster(own_database_url, tmp_path, fake_llm, **FAST_LEASE) as group:
        a = await group.instance("a")
        b = await group.instance("b")
        async with a.client(group.token) as on_a:
            task_id = (await submit(on_a, input="Keep some state.", tools=["run_code"]))["task_id"]
            async with on_a.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
                async for event in read_sse(response):  # until the first call's result is stored
                    step = event.json.get("step") if event.event == "reasoning_step" else None
                    result = (step or {}).get("tool_result") or {}
                    if result.get("tool_name") == "run_code":
                        break
        await fake_llm.wait_for_requests(2, MODEL)  # the held second call is under way
        await a.kill()
        async with b.client(group.token) as on_b:
            events = await stream(on_b, task_id)
            chain = (await on_b.get(f"/api/v1/tasks/{task_id}/chain")).json()

    assert_whole(events, "completed")
    calls = [
        s["tool_result"]
        for s in chain["steps"]
        if s["type"] == "tool_result" and s["tool_result"]["tool_name"] == "run_code"
    ]
    assert len(calls) == 2  # the first was not made again
    assert all(call["success"] for call in calls), calls
    first, second = (call["result"] for call in calls)
    assert first["files"]["created"] == [{"path": "state.txt", "size": 22}]
    assert second["stdout"] == "kept by the first call\n"
    assert second["value_repr"] == "False"
    assert "started again" in second["note"]
    # The model's second call died with instance a and was made again; nothing else twice.
    assert len(fake_llm.requests_for(MODEL)) == 4
