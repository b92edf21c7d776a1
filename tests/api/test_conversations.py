"""Conversations: each turn's run starts from every earlier turn, rebuilt from the stored
chains; one turn runs at a time; a conversation reads with its turns and totals."""

import json
from decimal import Decimal
from typing import Any

import httpx

from tests.api.helpers import assert_invalid, assert_problem, cost_of, stream, submit
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


async def _start(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/conversations", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _turn(client: httpx.AsyncClient, conversation: str, text: str) -> dict[str, Any]:
    accepted = await submit(client, input=text, conversation_id=conversation)
    events = await stream(client, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed", events[-2].json
    task: dict[str, Any] = (await client.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    return task


def _same(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with JSON tool results decoded: Postgres stores results as jsonb, which keeps
    their values but not the order of their keys."""
    decoded = []
    for message in messages:
        if message["role"] == "tool":
            message = {**message, "content": json.loads(message["content"])}
        decoded.append(message)
    return decoded


async def test_the_third_turn_sends_the_first_two_in_order_tools_included(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="t1")],
            prompt_tokens=100,
            completion_tokens=10,
        ),
        Reply.text("17 * 23 + 4 is 395.", prompt_tokens=120, completion_tokens=8),
        Reply.text("Doubled, that is 790.", prompt_tokens=150, completion_tokens=6),
        Reply.text("You are welcome.", prompt_tokens=170, completion_tokens=4),
    )
    async with service.client(tenant) as client:
        conversation = await _start(client, metadata={"channel": "chat"})
        first = await _turn(client, conversation["id"], "What is 17 * 23 + 4?")
        second = await _turn(client, conversation["id"], "And doubled?")
        third = await _turn(client, conversation["id"], "Thanks!")
        detail = (await client.get(f"/api/v1/conversations/{conversation['id']}")).json()

    # What the model saw answering turn 1 (after its tool call), then each answer.
    turn_one = fake.requests[1].body["messages"]
    system = turn_one[0]
    assert system["role"] == "system"
    assert [m["role"] for m in turn_one[1:]] == ["user", "assistant", "tool"]
    assert turn_one[2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert "395" in turn_one[3]["content"]
    history = [
        *turn_one[1:],
        {"role": "assistant", "content": "17 * 23 + 4 is 395."},
        {"role": "user", "content": "And doubled?"},
    ]
    assert _same(fake.requests[2].body["messages"]) == _same([system, *history])
    assert _same(fake.requests[3].body["messages"]) == _same(
        [
            system,
            *history,
            {"role": "assistant", "content": "Doubled, that is 790."},
            {"role": "user", "content": "Thanks!"},
        ]
    )

    assert [first["turn"], second["turn"], third["turn"]] == [1, 2, 3]
    assert first["conversation_id"] == conversation["id"]
    assert first["agent"] == {"name": "default", "version": 1}
    assert detail["turn_count"] == 3
    assert detail["metadata"] == {"channel": "chat"}
    assert [t["task_id"] for t in detail["turns"]] == [first["id"], second["id"], third["id"]]
    assert [t["result"] for t in detail["turns"]] == [t["answer"] for t in detail["turns"]]
    assert [t["answer"] for t in detail["turns"]] == [
        "17 * 23 + 4 is 395.",
        "Doubled, that is 790.",
        "You are welcome.",
    ]
    assert [t["input"] for t in detail["turns"]] == [
        "What is 17 * 23 + 4?",
        "And doubled?",
        "Thanks!",
    ]
    totals = detail["totals"]
    assert totals["turns"] == 3
    assert totals["llm_calls"] == 4
    assert totals["input_tokens"] == 100 + 120 + 150 + 170
    expected = cost_of(100, 10) + cost_of(120, 8) + cost_of(150, 6) + cost_of(170, 4)
    assert Decimal(totals["total_cost_usd"]) == expected


async def test_a_turn_submitted_while_one_runs_is_a_conflict_and_the_next_one_works(
    service: Service, tenant: str
) -> None:
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("slow answer", delay_s=30), Reply.text("second answer"))
    async with service.client(tenant) as client:
        conversation = await _start(client)
        running = await submit(client, input="first", conversation_id=conversation["id"])
        await fake.wait_for_requests(1)
        busy = await client.post(
            "/api/v1/tasks", json={"input": "second", "conversation_id": conversation["id"]}
        )
        cancelled = await client.post(f"/api/v1/tasks/{running['task_id']}/cancel")
        second = await _turn(client, conversation["id"], "second")
        detail = (await client.get(f"/api/v1/conversations/{conversation['id']}")).json()

    problem = assert_problem(busy, 409, "conversation-busy")
    assert problem["running_task_id"] == running["task_id"]
    assert cancelled.json()["status"] == "cancelled"
    # The refused turn took no number; the cancelled turn keeps its own, with no answer.
    assert second["turn"] == 2
    assert [t["status"] for t in detail["turns"]] == ["cancelled", "completed"]
    # The cancelled turn's input is history; its interrupted call left nothing to answer.
    assert fake.requests[-1].body["messages"][1:] == [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]


async def test_conversations_are_the_tenants_own(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant) as client, service.client(other_tenant) as other:
        conversation = await _start(client)
        read = await other.get(f"/api/v1/conversations/{conversation['id']}")
        turn = await other.post(
            "/api/v1/tasks", json={"input": "hi", "conversation_id": conversation["id"]}
        )
        listed = (await other.get("/api/v1/conversations")).json()
    assert_problem(read, 404, "not-found")
    assert_problem(turn, 404, "not-found")
    assert listed["items"] == []


async def test_a_member_adds_turns_only_to_their_own_conversations(
    service: Service, tenant: str
) -> None:
    async with (
        service.client(tenant, sub="alice") as alice,
        service.client(tenant, sub="bob") as bob,
        service.client(tenant, sub="viewer", roles=("viewer",)) as viewer,
    ):
        conversation = await _start(alice)
        refused = await bob.post(
            "/api/v1/tasks", json={"input": "hi", "conversation_id": conversation["id"]}
        )
        read = await viewer.get(f"/api/v1/conversations/{conversation['id']}")
        started = await viewer.post("/api/v1/conversations", json={})
    assert_problem(refused, 403, "forbidden")
    assert read.status_code == 200
    assert read.json()["turns"] == []
    assert_problem(started, 403, "forbidden")


async def test_a_conversation_names_an_agent_that_exists(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        unknown = await client.post("/api/v1/conversations", json={"agent": "nobody"})
        invalid = await client.post("/api/v1/conversations", json={"agent": "Not A Slug"})
        pinned = await _start(client, agent="default@1")
        other = await client.post(
            "/api/v1/tasks",
            json={"input": "hi", "conversation_id": pinned["id"], "agent": "someone-else"},
        )
    assert_invalid(unknown, "body.agent")
    assert_invalid(invalid, "body.agent")
    assert pinned["agent"] == "default@1"
    assert_invalid(other, "body.agent")
