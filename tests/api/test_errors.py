"""Bad input on every route that takes input answers problem details (RFC 9457) naming the
offending field, never a traceback or SQL; and the list routes page and filter as documented."""

from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.api.helpers import (
    PROBLEM,
    assert_invalid,
    assert_no_internals,
    assert_problem,
    script_two_tool_task,
    stream,
    submit,
)
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

# Event ids and step numbers are 32-bit integer columns on Postgres; neither bound fits them.
BEYOND_32_BITS = str(2**31)
BEYOND_64_BITS = str(10**23)


# (case id, request kwargs, expected `errors[].field`)
BAD_SUBMISSIONS: list[tuple[str, dict[str, Any], str]] = [
    (
        "body-not-json",
        {"content": b'{"input": "What', "headers": {"Content-Type": "application/json"}},
        "body",
    ),
    ("no-body", {}, "body"),
    ("neither-input-nor-messages", {"json": {}}, "body"),
    (
        "both-input-and-messages",
        {"json": {"input": "hi", "messages": [{"role": "user", "content": "hi"}]}},
        "body",
    ),
    ("unknown-field", {"json": {"input": "hi", "priority": "high"}}, "body.priority"),
    ("empty-input", {"json": {"input": ""}}, "body.input"),
    ("empty-messages", {"json": {"messages": []}}, "body.messages"),
    ("bad-message-role", {"json": {"messages": [{"role": "x"}]}}, "body.messages.0.role"),
    ("unknown-model", {"json": {"input": "hi", "model": "no-such-model"}}, "body.model"),
    ("unknown-tool", {"json": {"input": "hi", "tools": ["no_such_tool"]}}, "body.tools.0"),
    ("llm-is-not-a-tool", {"json": {"input": "hi", "tools": ["llm"]}}, "body.tools.0"),
    (
        "negative-budget",
        {"json": {"input": "hi", "budget": {"max_cost_usd": "-1"}}},
        "body.budget.max_cost_usd",
    ),
]


@pytest.mark.parametrize(
    ("request_kwargs", "field"),
    [(kwargs, field) for _, kwargs, field in BAD_SUBMISSIONS],
    ids=[name for name, _, _ in BAD_SUBMISSIONS],
)
async def test_a_bad_submission_is_a_validation_problem_naming_the_field(
    service: Service, tenant: str, request_kwargs: dict[str, Any], field: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.post("/api/v1/tasks", **request_kwargs)
        listed = await client.get("/api/v1/tasks")

    assert_invalid(response, field)
    assert listed.json()["items"] == []  # nothing was stored, nothing ran


ID_ROUTES = [
    ("GET", "/api/v1/tasks/{}", "path.task_id"),
    ("POST", "/api/v1/tasks/{}/cancel", "path.task_id"),
    ("GET", "/api/v1/tasks/{}/events", "path.task_id"),
    ("GET", "/api/v1/tasks/{}/chain", "path.task_id"),
    ("GET", "/api/v1/chains/{}", "path.chain_id"),
    ("GET", "/api/v1/chains/{}/steps", "path.chain_id"),
]


@pytest.mark.parametrize(
    ("method", "template", "field"), ID_ROUTES, ids=[f"{m} {t}" for m, t, _ in ID_ROUTES]
)
@pytest.mark.parametrize("bad_id", ["not-a-uuid", "12345"])
async def test_a_path_id_that_is_not_a_uuid_is_a_validation_problem(
    service: Service, tenant: str, method: str, template: str, field: str, bad_id: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.request(method, template.format(bad_id))
    assert_invalid(response, field)


# (case id, path with {tenant} and {id} placeholders, query, expected field)
BAD_QUERIES: list[tuple[str, str, dict[str, str], str]] = [
    ("tasks-limit-zero", "/api/v1/tasks", {"limit": "0"}, "query.limit"),
    ("tasks-limit-too-big", "/api/v1/tasks", {"limit": "201"}, "query.limit"),
    ("tasks-limit-not-a-number", "/api/v1/tasks", {"limit": "ten"}, "query.limit"),
    ("tasks-unknown-status", "/api/v1/tasks", {"status": "sleeping"}, "query.status"),
    ("tasks-bad-cursor", "/api/v1/tasks", {"cursor": "not-a-cursor"}, "query.cursor"),
    (
        "tasks-cursor-of-another-shape",  # valid base64 JSON, but not a (time, id) pair
        "/api/v1/tasks",
        {"cursor": "eyJhIjogMX0"},
        "query.cursor",
    ),
    ("events-negative-after", "/api/v1/tasks/{id}/events", {"after": "-1"}, "query.after"),
    ("events-after-not-a-number", "/api/v1/tasks/{id}/events", {"after": "x"}, "query.after"),
    ("steps-negative-after", "/api/v1/chains/{id}/steps", {"after": "-1"}, "query.after"),
    ("steps-limit-zero", "/api/v1/chains/{id}/steps", {"limit": "0"}, "query.limit"),
    ("steps-limit-too-big", "/api/v1/chains/{id}/steps", {"limit": "1001"}, "query.limit"),
    ("chains-limit-zero", "/api/v1/tenants/{tenant}/chains", {"limit": "0"}, "query.limit"),
    (
        "chains-unknown-status",
        "/api/v1/tenants/{tenant}/chains",
        {"status": "sleeping"},
        "query.status",
    ),
    (
        "chains-bad-from",
        "/api/v1/tenants/{tenant}/chains",
        {"from": "yesterday"},
        "query.from",
    ),
    ("chains-bad-to", "/api/v1/tenants/{tenant}/chains", {"to": "2025-13-45"}, "query.to"),
    ("chains-bad-cursor", "/api/v1/tenants/{tenant}/chains", {"cursor": "%%%"}, "query.cursor"),
]


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [(path, query, field) for _, path, query, field in BAD_QUERIES],
    ids=[name for name, _, _, _ in BAD_QUERIES],
)
async def test_a_bad_query_parameter_is_a_validation_problem_naming_it(
    service: Service, tenant: str, path: str, query: dict[str, str], field: str
) -> None:
    url = path.format(tenant=tenant, id=uuid4())
    async with service.client(tenant) as client:
        response = await client.get(url, params=query)
    assert_invalid(response, field)


async def _finished_task(service: Service, client: httpx.AsyncClient) -> dict[str, Any]:
    script_two_tool_task(service.fake_llm)
    accepted = await submit(client)
    await stream(client, accepted["task_id"])
    return accepted


@pytest.mark.parametrize(
    "last_event_id",
    [
        pytest.param(b"abc", id="letters"),
        pytest.param(b"-1", id="negative"),
        pytest.param(b"1.5", id="fraction"),
        pytest.param(b"0x10", id="hex"),
        # '²' in Latin-1: str.isdigit() says it is a digit, int() refuses it.
        pytest.param(b"\xb2", id="superscript-two"),
        pytest.param(BEYOND_32_BITS.encode(), id="beyond-32-bits"),
        pytest.param(BEYOND_64_BITS.encode(), id="beyond-64-bits"),
    ],
)
async def test_a_bad_last_event_id_is_a_validation_problem(
    service: Service, tenant: str, last_event_id: bytes
) -> None:
    async with service.client(tenant) as client:
        task = await _finished_task(service, client)
        response = await client.get(
            f"/api/v1/tasks/{task['task_id']}/events", headers={b"Last-Event-ID": last_event_id}
        )
    assert_invalid(response, "header.Last-Event-ID")


@pytest.mark.parametrize(
    "path", ["/api/v1/tasks/{task_id}/events", "/api/v1/chains/{chain_id}/steps"]
)
@pytest.mark.parametrize(
    "after", [BEYOND_32_BITS, BEYOND_64_BITS], ids=["beyond-32-bits", "beyond-64-bits"]
)
async def test_an_after_beyond_any_possible_id_is_a_validation_problem(
    service: Service, tenant: str, path: str, after: str
) -> None:
    async with service.client(tenant) as client:
        task = await _finished_task(service, client)
        response = await client.get(path.format(**task), params={"after": after})
    assert_invalid(response, "query.after")


async def test_cancelling_a_finished_task_is_a_task_finished_conflict(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        task = await _finished_task(service, client)
        response = await client.post(f"/api/v1/tasks/{task['task_id']}/cancel")
    assert_no_internals(response)
    body = assert_problem(response, 409, "task-finished")
    assert task["task_id"] in body["detail"]


@pytest.mark.parametrize(
    "path", ["/api/v1/nothing-here", "/nothing-here", "/api/v1/tasks/{id}/pause", "/api/v2/tasks"]
)
async def test_an_unknown_route_is_a_not_found_problem(
    service: Service, tenant: str, path: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.get(path.format(id=uuid4()))
    assert_no_internals(response)
    assert_problem(response, 404, "not-found")


WRONG_METHODS = [
    ("DELETE", "/api/v1/tasks", {"GET", "POST"}),
    ("PUT", "/api/v1/tasks/{id}", {"GET", "DELETE"}),
    ("GET", "/api/v1/tasks/{id}/cancel", {"POST"}),
    ("POST", "/api/v1/chains/{id}", {"GET"}),
    ("PUT", "/api/v1/tenants/{id}/remote-agents", {"GET", "POST"}),
    ("POST", "/api/v1/tenants/{id}/remote-agents/{id}", {"GET", "PATCH", "DELETE"}),
    ("POST", "/healthz", {"GET"}),
]


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in WRONG_METHODS])
async def test_a_wrong_method_is_a_method_not_allowed_problem(
    service: Service, tenant: str, method: str, path: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.request(method, path.format(id=uuid4()))
    assert_no_internals(response)
    assert_problem(response, 405, "method-not-allowed")


@pytest.mark.parametrize(("method", "path", "allowed"), WRONG_METHODS)
async def test_a_method_not_allowed_answer_lists_every_method_of_the_path(
    service: Service, tenant: str, method: str, path: str, allowed: set[str]
) -> None:
    """RFC 9110 §15.5.6: a 405 carries `Allow` with the resource's supported methods."""
    async with service.client(tenant) as client:
        response = await client.request(method, path.format(id=uuid4()))
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed


# --- listing: the happy paths -------------------------------------------------------------


async def _quick_task(service: Service, client: httpx.AsyncClient) -> str:
    """A task answered in one LLM call, run to its end; returns its id."""
    service.fake_llm.script(MODEL, Reply.text("42"))
    task_id: str = (await submit(client))["task_id"]
    await stream(client, task_id)
    return task_id


async def _cancelled_task(service: Service, client: httpx.AsyncClient) -> str:
    """A task cancelled while its LLM call hangs; returns its id."""
    fake = service.fake_llm
    fake.script(MODEL, Reply.text("too late", delay_s=30))
    arrived = len(fake.requests)
    task_id: str = (await submit(client))["task_id"]
    await fake.wait_for_requests(arrived + 1)
    response = await client.post(f"/api/v1/tasks/{task_id}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    return task_id


async def test_the_task_list_pages_newest_first_with_a_cursor(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        created = [await _quick_task(service, client) for _ in range(3)]
        first = await client.get("/api/v1/tasks", params={"limit": 2})
        cursor = first.json()["next_cursor"]
        second = await client.get("/api/v1/tasks", params={"limit": 2, "cursor": cursor})

    assert first.status_code == second.status_code == 200
    first_ids = [task["id"] for task in first.json()["items"]]
    second_ids = [task["id"] for task in second.json()["items"]]
    assert cursor
    assert len(first_ids) == 2
    assert second.json()["next_cursor"] is None
    assert not set(first_ids) & set(second_ids)
    assert first_ids + second_ids == created[::-1]


async def test_the_task_list_filters_by_status(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        completed = await _quick_task(service, client)
        cancelled = await _cancelled_task(service, client)
        pages = {
            status: (await client.get("/api/v1/tasks", params={"status": status})).json()
            for status in ("completed", "cancelled", "working")
        }

    assert [task["id"] for task in pages["completed"]["items"]] == [completed]
    assert [task["id"] for task in pages["cancelled"]["items"]] == [cancelled]
    assert pages["working"]["items"] == []
    assert all(page["next_cursor"] is None for page in pages.values())


async def test_a_chains_steps_page_with_after_and_limit(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        task = await _finished_task(service, client)
        url = f"/api/v1/chains/{task['chain_id']}/steps"
        everything = (await client.get(url)).json()
        pages = [
            (await client.get(url, params={"after": after, "limit": 4})).json()
            for after in (0, 4, 8)
        ]
        chain = (await client.get(f"/api/v1/chains/{task['chain_id']}")).json()

    def numbers(page: dict[str, Any]) -> list[int]:
        return [step["step_number"] for step in page["items"]]

    assert numbers(everything) == list(range(1, 12))
    assert everything["next_after"] is None
    assert [numbers(page) for page in pages] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]]
    assert [page["next_after"] for page in pages] == [4, 8, None]
    assert [step for page in pages for step in page["items"]] == chain["steps"]


async def _three_chains(
    service: Service, client: httpx.AsyncClient, tenant: str
) -> list[dict[str, Any]]:
    """Two completed chains, then a cancelled one; their summaries, oldest first."""
    ids = [
        await _quick_task(service, client),
        await _quick_task(service, client),
        await _cancelled_task(service, client),
    ]
    listed = (await client.get(f"/api/v1/tenants/{tenant}/chains")).json()["items"]
    by_task = {chain["task_id"]: chain for chain in listed}
    return [by_task[task_id] for task_id in ids]


async def _chain_ids(client: httpx.AsyncClient, tenant: str, **query: Any) -> list[str]:
    response = await client.get(f"/api/v1/tenants/{tenant}/chains", params=query)
    assert response.status_code == 200, response.text
    return [chain["id"] for chain in response.json()["items"]]


async def test_a_tenants_chains_are_listed_newest_first_and_filtered_by_status_and_agent(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        a, b, c = await _three_chains(service, client, tenant)
        everything = await _chain_ids(client, tenant)
        completed = await _chain_ids(client, tenant, status="completed")
        cancelled = await _chain_ids(client, tenant, status="cancelled")
        react = await _chain_ids(client, tenant, agent=a["agent_id"])
        other_agent = await _chain_ids(client, tenant, agent="no-such-agent")

    assert [a["status"], b["status"], c["status"]] == ["completed", "completed", "cancelled"]
    assert everything == [c["id"], b["id"], a["id"]]
    assert completed == [b["id"], a["id"]]
    assert cancelled == [c["id"]]
    assert react == everything
    assert other_agent == []


async def test_a_tenants_chains_are_filtered_by_start_time_from_inclusive_to_exclusive(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        a, b, c = await _three_chains(service, client, tenant)
        b_start = datetime.fromisoformat(b["started_at"])
        since_b = await _chain_ids(client, tenant, **{"from": b["started_at"]})
        # The same instant with another offset, and with none (taken as UTC).
        b_in_tokyo = b_start.astimezone(timezone(timedelta(hours=9))).isoformat()
        since_b_tokyo = await _chain_ids(client, tenant, **{"from": b_in_tokyo})
        b_naive = b_start.replace(tzinfo=None).isoformat()
        since_b_naive = await _chain_ids(client, tenant, **{"from": b_naive})
        before_b = await _chain_ids(client, tenant, to=b["started_at"])
        a_to_c = await _chain_ids(
            client, tenant, **{"from": a["started_at"], "to": c["started_at"]}
        )

    assert since_b == [c["id"], b["id"]]
    assert since_b_tokyo == since_b
    assert since_b_naive == since_b
    assert before_b == [a["id"]]
    assert a_to_c == [b["id"], a["id"]]


async def test_a_tenants_chains_page_with_a_cursor_that_keeps_the_filters(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        a, b, c = await _three_chains(service, client, tenant)
        url = f"/api/v1/tenants/{tenant}/chains"
        first = (await client.get(url, params={"limit": 2})).json()
        rest = (await client.get(url, params={"limit": 2, "cursor": first["next_cursor"]})).json()
        completed_first = (await client.get(url, params={"limit": 1, "status": "completed"})).json()
        completed_rest = (
            await client.get(
                url,
                params={
                    "limit": 1,
                    "status": "completed",
                    "cursor": completed_first["next_cursor"],
                },
            )
        ).json()

    assert [chain["id"] for chain in first["items"]] == [c["id"], b["id"]]
    assert [chain["id"] for chain in rest["items"]] == [a["id"]]
    assert rest["next_cursor"] is None
    assert [chain["id"] for chain in completed_first["items"]] == [b["id"]]
    assert [chain["id"] for chain in completed_rest["items"]] == [a["id"]]
    assert completed_rest["next_cursor"] is None


async def test_problems_are_served_as_problem_json_even_to_clients_asking_for_html(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        response = await client.get(f"/api/v1/tasks/{uuid4()}", headers={"Accept": "text/html"})
    assert response.headers["content-type"] == PROBLEM
    assert_problem(response, 404, "not-found")
