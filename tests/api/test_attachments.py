"""Files given to a task (`file_ids`): the agent is told of them and reads them with the file
tools; a file that is not the tenant's is refused like one that never existed."""

from uuid import uuid4

from tests.api.helpers import assert_invalid, configure, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


async def _upload(service: Service, tenant: str, name: str, data: bytes) -> str:
    async with service.client(tenant) as client:
        response = await client.post("/api/v1/files", files={"file": (name, data, "text/plain")})
    assert response.status_code == 201, response.text
    file_id: str = response.json()["id"]
    return file_id


async def test_a_task_reads_the_file_it_was_given(service: Service, tenant: str) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["read_file", "calculator"]})
    file_id = await _upload(service, tenant, "notes.txt", b"The launch code word is HELIOTROPE.")
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("read_file", {"file_id": file_id}, id="r1")]),
        Reply.text("The code word is HELIOTROPE."),
    )
    async with service.client(tenant) as client:
        accepted = await submit(client, input="What is the code word?", file_ids=[file_id])
        events = await stream(client, accepted["task_id"])
    first = service.fake_llm.requests_for(MODEL)[0].body["messages"]
    note = first[-1]["content"]
    assert file_id in note
    assert "notes.txt" in note
    assert "text/plain" in note
    results = [
        e.json["step"]["tool_result"]
        for e in events
        if e.event == "reasoning_step" and e.json["step"]["type"] == "tool_result"
    ]
    read = next(r for r in results if not r["model"])
    assert read["success"], read
    assert "HELIOTROPE" in str(read["result"])
    assert events[-1].json["final_state"] == "completed"


async def test_another_tenants_file_cannot_be_given(
    service: Service, tenant: str, other_tenant: str
) -> None:
    theirs = await _upload(service, other_tenant, "secret.txt", b"not yours")
    async with service.client(tenant) as client:
        for file_ids in ([theirs], [str(uuid4())]):
            response = await client.post(
                "/api/v1/tasks", json={"input": "Read it.", "file_ids": file_ids}
            )
            body = assert_invalid(response, "body.file_ids.0")
            assert "not yours" not in response.text
            assert body["errors"][0]["message"]
