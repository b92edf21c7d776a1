"""Chains over HTTP: readable while the run goes on, the same by task and by id; keep-alives."""

from pathlib import Path

from tests.api.helpers import script_two_tool_task, stream, submit
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.service import MODEL, Service, running_service, service_settings
from tests.sse import collect, read_sse


async def test_a_chain_is_readable_while_it_runs(service: Service, tenant: str) -> None:
    script_two_tool_task(service.fake_llm, answer_delay_s=0.5)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            # Published means stored: once step 9 (the third LLM call) has streamed, the chain
            # holds it, while the answer is still being written.
            seen = await collect(response, stop_after=11)
        await service.fake_llm.wait_for_requests(3)
        running = (await client.get(f"/api/v1/tasks/{task_id}/chain")).json()
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        events = await stream(client, task_id)
        finished = (await client.get(f"/api/v1/chains/{running['id']}")).json()
    assert seen[-1].json["step"]["step_number"] == 9
    assert running["status"] == "thinking"
    assert task["status"] == "working"
    # Two LLM round trips and two tools are stored, the third LLM call is under way.
    assert [step["step_number"] for step in running["steps"]] == list(range(1, 10))
    assert running["metrics"]["total_steps"] == 9
    assert finished["steps"][:9] == running["steps"]
    assert finished["status"] == "completed"
    assert len(finished["steps"]) == len(events) - 4


async def test_an_idle_stream_sends_keepalive_comments(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, tenant: str
) -> None:
    fake_llm.script(MODEL, Reply.text("done thinking", delay_s=0.3))
    settings = service_settings(tmp_path, database_url, fake_llm, sse_keepalive_s=0.05)
    async with running_service(settings, fake_llm) as quiet, quiet.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
            kinds = [e.event or "keep-alive" async for e in read_sse(response, comments=True)]
    first_result = kinds.index("reasoning_step", kinds.index("reasoning_step") + 1)
    assert "keep-alive" in kinds[:first_result]
    assert kinds[-1] == "done"


async def test_a_page_after_the_largest_step_number_is_empty_for_every_reader(
    service: Service, tenant: str
) -> None:
    service.fake_llm.script(MODEL, Reply.text("done"))
    async with service.client(tenant) as client:
        accepted = await submit(client)
        await stream(client, accepted["task_id"])
    largest = 2**31 - 1  # the largest step number a 32-bit column holds
    pages, beyond = {}, {}
    for role in ("member", "viewer", "auditor"):
        async with service.client(tenant, sub=f"{role}-1", roles=(role,)) as client:
            url = f"/api/v1/chains/{accepted['chain_id']}/steps"
            pages[role] = await client.get(url, params={"after": largest, "limit": 1000})
            beyond[role] = await client.get(url, params={"after": largest + 1})

    for role, page in pages.items():
        assert page.status_code == 200, (role, page.text)
        assert page.json() == {"items": [], "next_after": None}
        assert beyond[role].status_code == 422
