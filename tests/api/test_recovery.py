"""A server killed mid-run (SIGKILL, a real process): what it streamed is in the database, and
the next start resumes the run from its stored steps, with a stream that goes on without a gap.
(Runs on both backends; tests/api/test_cluster.py has the multi-instance cases on Postgres.)"""

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

import httpx

from app.chain import ReasoningStep
from tests.api.helpers import script_two_tool_task, stream, submit
from tests.cluster import free_port, same_conversation
from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import MODEL, Service, running_service, service_settings
from tests.sse import read_sse


@asynccontextmanager
async def server_process(
    env: dict[str, str], port: int
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`omniforge serve` in a process of its own; yields once it accepts requests."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "serve",
        "--port",
        str(port),
        env={**os.environ, **env},
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert process.stderr is not None
    output = []
    while True:
        line = (await process.stderr.readline()).decode()
        output.append(line)
        if not line:
            raise AssertionError("the server exited before it started:\n" + "".join(output))
        if "Application startup complete" in line:
            break
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_a_killed_server_leaves_its_streamed_steps_and_its_restart_resumes_the_run(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text("never sent", delay_s=30),
        Reply.text("6 * 7 = 42."),
    )
    # A database of its own: no other service claims the run the restart gives back.
    database_url = own_database_url
    # Short leases: the restart takes the killed server's run back once its lease lapses, and
    # judges that only once it has held its own for a whole lease.
    settings = service_settings(tmp_path, database_url, fake_llm, runner_heartbeat_s=0.5)
    env = {
        "OMNIFORGE_DATABASE_URL": database_url,
        "OMNIFORGE_DATA_DIR": str(tmp_path),
        "OMNIFORGE_JWT_SECRET": settings.resolved_jwt_secret(),
        "OMNIFORGE_MODELS_FILE": str(settings.models_file),
        "OMNIFORGE_DEFAULT_MODEL": MODEL,
        "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",
        "OMNIFORGE_RUNNER_HEARTBEAT_S": "0.5",
    }
    port = free_port()
    async with running_service(settings, fake_llm) as probe:
        tenant = await probe.create_tenant(f"t-killed-{uuid4().hex[:8]}")
        token = probe.token(tenant)  # same secret as the process
    headers = {"Authorization": f"Bearer {token}"}
    streamed = []
    base_url = f"http://127.0.0.1:{port}"
    # A fresh process loads LiteLLM after it is ready (seconds of CPU) and the run waits for
    # it: the first event may be longer in coming than httpx's default 5 s.
    timeout = httpx.Timeout(5.0, read=60.0)
    async with (
        server_process(env, port) as process,
        httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout) as c,
    ):
        task_id = (await submit(c))["task_id"]
        async with c.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            async for event in read_sse(response):
                streamed.append(event)
                # llm call + result, calculator call + result, then the 2nd llm call
                if len(streamed) == 7:
                    break
        await fake_llm.wait_for_requests(2)
        process.send_signal(signal.SIGKILL)
        await process.wait()

    async with running_service(settings, fake_llm) as restarted, restarted.client(tenant) as c:
        replay = await stream(c, task_id)
        task = (await c.get(f"/api/v1/tasks/{task_id}")).json()
        chain = (await c.get(f"/api/v1/tasks/{task_id}/chain")).json()

    streamed_steps = [
        ReasoningStep.model_validate(e.json["step"])
        for e in streamed
        if e.event == "reasoning_step"
    ]
    assert len(streamed_steps) == 5
    stored = [ReasoningStep.model_validate(step) for step in chain["steps"]]
    assert stored[: len(streamed_steps)] == streamed_steps
    assert task["status"] == "completed"
    assert task["result"] == "6 * 7 = 42."
    assert chain["status"] == "completed"
    assert [e.id for e in replay] == list(range(1, len(replay) + 1))
    assert [e.event for e in replay[-2:]] == ["chain_completed", "done"]
    resumed = [e for e in replay if e.event == "task_status" and e.json.get("resumed")]
    assert len(resumed) == 1
    assert [e.json for e in replay[: len(streamed)]] == [e.json for e in streamed]
    # The first call was made once; the second, in flight at the kill, again (an LLM call
    # may be): three requests for two calls.
    requests = fake_llm.requests_for(MODEL)
    assert len(requests) == 3
    assert same_conversation(requests[1].body["messages"], requests[2].body["messages"])


async def test_another_server_starting_on_the_same_database_leaves_live_runs_alone(
    service: Service, tenant: str, tmp_path: Path
) -> None:
    script_two_tool_task(service.fake_llm, answer_delay_s=0.3)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        await service.fake_llm.wait_for_requests(3)  # the run is in its last LLM call
        settings = service_settings(tmp_path, service.settings.database_url or "", service.fake_llm)
        async with running_service(settings, service.fake_llm) as second:
            assert second.state.runs.runner_id != service.state.runs.runner_id
        events = await stream(client, task_id)
    assert events[-1].json["final_state"] == "completed"
