"""Helpers for API tests: scripted tasks, streams read to the end, problem assertions."""

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import httpx

from tests.fakes.openai_server import FakeLLMServer, Reply, ToolCall
from tests.service import INPUT_PRICE, MODEL, OUTPUT_PRICE
from tests.sse import SSE, collect, read_sse

PROBLEM = "application/problem+json"
# What no response may show: internals of the server or its database.
INTERNALS = ("Traceback", 'File "', "sqlalchemy", "asyncpg", "aiosqlite", "SELECT ", "INSERT ")


def script_two_tool_task(fake: FakeLLMServer, *, answer_delay_s: float = 0.0) -> None:
    """The model calls the calculator, then current_time, then answers."""
    fake.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.tool_calls(
            [ToolCall("current_time", {"timezone": "Asia/Tokyo"}, id="c2")],
            prompt_tokens=150,
            completion_tokens=25,
        ),
        Reply.text(
            "17 * 23 + 4 = 395.", prompt_tokens=200, completion_tokens=30, delay_s=answer_delay_s
        ),
    )


def cost_of(prompt_tokens: int, completion_tokens: int) -> Decimal:
    return Decimal(INPUT_PRICE) * prompt_tokens + Decimal(OUTPUT_PRICE) * completion_tokens


TWO_TOOL_TASK_COST = cost_of(100, 20) + cost_of(150, 25) + cost_of(200, 30)


async def submit(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/tasks", json={"input": "What is 17 * 23 + 4?", **body})
    assert response.status_code == 202, response.text
    accepted: dict[str, Any] = response.json()
    return accepted


async def stream(
    client: httpx.AsyncClient,
    task_id: str,
    *,
    params: dict[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> list[SSE]:
    """The task's stream from the start (or where the headers say) to its end."""
    path = f"/api/v1/tasks/{task_id}/events"
    async with client.stream("GET", path, params=params, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return await collect(r)


async def until_event(
    client: httpx.AsyncClient, task_id: str, event_type: str, **fields: Any
) -> list[SSE]:
    """The task's stream from the start through its first `event_type` event whose data has
    `fields`."""
    seen: list[SSE] = []
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as response:
        assert response.status_code == 200, await response.aread()
        async for event in read_sse(response):
            seen.append(event)
            if event.event == event_type and all(event.json.get(k) == v for k, v in fields.items()):
                return seen
    raise AssertionError(f"the stream ended without {event_type}: {[e.event for e in seen]}")


async def get_json(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    """A 200 answer's JSON object."""
    response = await client.get(path)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def result_of(chain: dict[str, Any], tool: str) -> dict[str, Any]:
    """The `tool_result` of the chain's one call of `tool`."""
    steps = chain["steps"]
    [call] = [s for s in steps if s["type"] == "tool_call" and s["tool_call"]["tool_name"] == tool]
    [result] = [s for s in steps if s["parent_step_id"] == call["id"]]
    info: dict[str, Any] = result["tool_result"]
    return info


def tool_message(request_body: dict[str, Any]) -> str:
    """The one tool message of an LLM request."""
    [message] = [m for m in request_body["messages"] if m["role"] == "tool"]
    content: str = message["content"]
    return content


def assert_problem(response: httpx.Response, status: int, type_slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["type"] == f"https://omniforge.dev/problems/{type_slug}"
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    return body


def assert_no_internals(response: httpx.Response) -> None:
    for marker in INTERNALS:
        assert marker not in response.text, response.text


def assert_invalid(response: httpx.Response, field: str) -> dict[str, Any]:
    """A 422 problem whose `errors` name `field` (or a part of it: `body` for `body.15`, the
    position where a JSON body stops parsing)."""
    assert_no_internals(response)
    body = assert_problem(response, 422, "validation-error")
    fields = [error["field"] for error in body["errors"]]
    assert any(f == field or f.startswith(field + ".") for f in fields), body
    assert all(error["message"] for error in body["errors"])
    return body


async def configure(
    service: Any, tenant: str, setting: str, body: dict[str, Any]
) -> dict[str, Any]:
    """PUTs a tenant setting (`quotas`, `models`, `visibility`, `tools`) as its admin."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.put(f"/api/v1/tenants/{tenant}/{setting}", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def open_network(service: Any, tenant: str, entries: list[str]) -> dict[str, Any]:
    """Opens `entries` (loopback, private networks, single ports) to the tenant's outbound
    calls, as a platform admin does: its `platform_allow`."""
    async with service.client(tenant, sub="ops", roles=("platform_admin",)) as platform:
        response = await platform.put(
            f"/api/v1/tenants/{tenant}/network", json={"platform_allow": entries}
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def define_agent(service: Any, tenant: str, name: str, **definition: Any) -> dict[str, Any]:
    """Defines an agent of `tenant` through the API, as its admin would."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.post("/api/v1/agents", json={"name": name, **definition})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created
