"""Files given to a task or a conversation (`file_ids`): the agent is told of them and reads
them with the file tools; a conversation's files, and those its turns were given, stay
readable in its later turns; a file that is not the tenant's is refused like one that never
existed."""

from typing import Any
from uuid import uuid4

import httpx

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


def _told_of(service: Service, request: int) -> str:
    """The (last) note of attached files in the model's `request`-th request ('' without
    one)."""
    messages = service.fake_llm.requests_for(MODEL)[request].body["messages"]
    notes = [
        str(m["content"])
        for m in messages
        if str(m.get("content") or "").startswith("Files attached")
    ]
    return notes[-1] if notes else ""


async def _start(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/conversations", json=body)
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


async def _turn(client: httpx.AsyncClient, conversation: str, text: str, **body: Any) -> None:
    accepted = await submit(client, input=text, conversation_id=conversation, **body)
    events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed", events[-1].json


async def test_every_turn_reads_the_conversations_files_and_those_earlier_turns_were_given(
    service: Service, tenant: str
) -> None:
    await configure(service, tenant, "tools", {"enabled_tools": ["read_file", "calculator"]})
    brief = await _upload(service, tenant, "brief.txt", b"The project is called KESTREL.")
    later = await _upload(service, tenant, "later.txt", b"The deadline is in March.")
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("read_file", {"file_id": brief}, id="r1")]),
        Reply.text("It is called KESTREL."),
        Reply.text("Noted."),
        Reply.tool_calls([ToolCall("read_file", {"file_id": later}, id="r2")]),
        Reply.text("March."),
    )
    async with service.client(tenant) as client:
        conversation = await _start(client, file_ids=[brief])
        assert conversation["file_ids"] == [brief]
        await _turn(client, conversation["id"], "What is the project called?")
        await _turn(client, conversation["id"], "Here is another file.", file_ids=[later])
        await _turn(client, conversation["id"], "When is the deadline?")
        detail = (await client.get(f"/api/v1/conversations/{conversation['id']}")).json()
        chains = [
            (await client.get(f"/api/v1/tasks/{turn['task_id']}/chain")).json()
            for turn in detail["turns"]
        ]
    notes = [_told_of(service, request) for request in range(5)]
    # Turn 1 (requests 0-1) knows the conversation's file; turn 2 (request 2) and turn 3
    # (requests 3-4) also the file turn 2 was given.
    assert brief in notes[0]
    assert later not in notes[0]
    for note in notes[2:]:
        assert brief in note
        assert later in note
        assert "later.txt" in note
    assert detail["file_ids"] == [brief, later]
    reads = [
        step["tool_result"]
        for chain in chains
        for step in chain["steps"]
        if step["tool_result"] and not step["tool_result"]["model"]
    ]
    assert [read["success"] for read in reads] == [True, True]
    assert "KESTREL" in str(reads[0]["result"])
    assert "March" in str(reads[1]["result"])


async def test_a_deleted_file_drops_out_of_the_next_turn(service: Service, tenant: str) -> None:
    kept = await _upload(service, tenant, "kept.txt", b"kept")
    gone = await _upload(service, tenant, "gone.txt", b"gone")
    service.fake_llm.script(MODEL, Reply.text("Fine."))
    async with service.client(tenant) as client:
        conversation = await _start(client, file_ids=[kept, gone])
        deleted = await client.delete(f"/api/v1/files/{gone}")
        assert deleted.status_code == 204, deleted.text
        await _turn(client, conversation["id"], "Anything new?")
        detail = (await client.get(f"/api/v1/conversations/{conversation['id']}")).json()
    note = _told_of(service, 0)
    assert kept in note
    assert gone not in note
    assert detail["file_ids"] == [kept]


async def test_a_conversation_refuses_a_file_that_is_not_its_tenants(
    service: Service, tenant: str, other_tenant: str
) -> None:
    theirs = await _upload(service, other_tenant, "theirs.txt", b"not yours")
    async with service.client(tenant) as client:
        for file_ids in ([theirs], [str(uuid4())]):
            response = await client.post("/api/v1/conversations", json={"file_ids": file_ids})
            assert_invalid(response, "body.file_ids.0")
            assert "not yours" not in response.text
        listed = (await client.get("/api/v1/conversations")).json()
    assert listed["items"] == []


async def test_a_conversations_turns_read_at_most_fifty_files_in_all(
    service: Service, tenant: str
) -> None:
    ids = [await _upload(service, tenant, f"f{n}.txt", b"x") for n in range(51)]
    service.fake_llm.script(MODEL, Reply.text("One."), Reply.text("Two."))
    async with service.client(tenant) as client:
        conversation = await _start(client, file_ids=ids[:20])
        await _turn(client, conversation["id"], "one", file_ids=ids[20:40])
        await _turn(client, conversation["id"], "two", file_ids=ids[40:50])
        refused = await client.post(
            "/api/v1/tasks",
            json={"input": "three", "conversation_id": conversation["id"], "file_ids": ids[50:]},
        )
        detail = (await client.get(f"/api/v1/conversations/{conversation['id']}")).json()
    body = assert_invalid(refused, "body.file_ids")
    assert "at most 50" in body["errors"][0]["message"]
    assert detail["file_ids"] == ids[:50]
    assert detail["turn_count"] == 2
