"""Stream tickets: a short-lived credential that opens one task's stream without an
`Authorization` header (a browser's EventSource), as the caller who asked for it."""

import base64
import time
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx

from app.security import Principal
from app.security.stream_tickets import StreamTickets
from tests.api.helpers import assert_problem, configure, script_two_tool_task, stream, submit
from tests.service import Service
from tests.sse import SSE, collect

PLATFORM = ("platform_admin",)


async def _ticket(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await client.post(f"/api/v1/tasks/{task_id}/stream-ticket")
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    answer: dict[str, Any] = response.json()
    return answer


async def _stream_with(service: Service, url: str, **headers: str) -> list[SSE]:
    """The stream at `url` read without any Authorization header."""
    async with (
        service.client() as anonymous,
        anonymous.stream("GET", url, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        return await collect(response)


async def _refused(service: Service, url: str) -> httpx.Response:
    async with service.client() as anonymous:
        return await anonymous.get(url)


async def _finished_task(service: Service, client: httpx.AsyncClient) -> str:
    script_two_tool_task(service.fake_llm)
    accepted = await submit(client)
    await stream(client, accepted["task_id"])
    task_id: str = accepted["task_id"]
    return task_id


async def test_a_ticket_opens_its_tasks_stream_without_a_header_for_the_ticket_lifetime(
    service: Service, tenant: str
) -> None:
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        accepted = await submit(client)
        before = time.time()
        ticket = await _ticket(client, accepted["task_id"])
        after = time.time()
        with_token = await stream(client, accepted["task_id"])

    with_ticket = await _stream_with(service, ticket["stream_url"])

    assert ticket["stream_url"] == (
        f"/api/v1/tasks/{accepted['task_id']}/events?ticket={ticket['ticket']}"
    )
    ttl = service.settings.stream_ticket_ttl_s
    assert before + ttl - 0.001 <= ticket_expiry(ticket) <= after + ttl
    assert _as_read(with_ticket) == _as_read(with_token)
    assert with_ticket[-1].event == "done"


def ticket_expiry(ticket: dict[str, Any]) -> float:
    return datetime.fromisoformat(ticket["expires_at"]).timestamp()


async def test_a_ticket_stream_is_the_callers_view_of_the_task(
    service: Service, tenant: str
) -> None:
    """A member's ticket streams what the member may see, an auditor's what auditors see."""
    await configure(service, tenant, "visibility", {"tools": {"calculator": "hidden"}})
    async with (
        service.client(tenant, sub="alice") as member,
        service.client(tenant, sub="audrey", roles=("auditor",)) as auditor,
    ):
        task_id = await _finished_task(service, member)
        members_view = await stream(member, task_id)
        auditors_view = await stream(auditor, task_id)
        members_ticket = await _ticket(member, task_id)
        auditors_ticket = await _ticket(auditor, task_id)

    members_ticket_view = await _stream_with(service, members_ticket["stream_url"])
    auditors_ticket_view = await _stream_with(service, auditors_ticket["stream_url"])
    assert _as_read(members_ticket_view) == _as_read(members_view)
    assert _as_read(auditors_ticket_view) == _as_read(auditors_view)
    assert "calculator" in _tools_called(auditors_view)
    assert "calculator" not in _tools_called(members_view)


def _as_read(events: list[SSE]) -> list[tuple[int | None, str, Any]]:
    """Events as a client reads them (a replayed event's JSON may order its keys otherwise)."""
    return [(event.id, event.event, event.json) for event in events]


def _tools_called(events: list[SSE]) -> list[str]:
    steps = [event.json["step"] for event in events if event.event == "reasoning_step"]
    return [step["tool_call"]["tool_name"] for step in steps if step.get("tool_call")]


async def test_a_ticket_stream_resumes_after_last_event_id_or_after(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant) as client:
        task_id = await _finished_task(service, client)
        everything = await stream(client, task_id)
        ticket = await _ticket(client, task_id)

    # What a reconnecting EventSource sends, and what a page opening a new one can ask for.
    by_header = await _stream_with(service, ticket["stream_url"], **{"Last-Event-ID": "5"})
    by_query = await _stream_with(service, f"{ticket['stream_url']}&after=5")

    assert _as_read(by_header) == _as_read(by_query) == _as_read(everything[5:])
    assert by_header[0].id == 6


async def test_another_tasks_ticket_is_refused(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        first = await _finished_task(service, client)
        second = await _finished_task(service, client)
        ticket = await _ticket(client, first)

    response = await _refused(service, f"/api/v1/tasks/{second}/events?ticket={ticket['ticket']}")

    body = assert_problem(response, 401, "unauthorized")
    assert "another task" in body["detail"]
    assert ticket["ticket"] not in response.text


async def test_an_expired_ticket_is_refused(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        task_id = await _finished_task(service, client)
    tickets = StreamTickets.from_settings(service.settings)
    stale = tickets.issue(
        Principal(subject="alice", tenant_id=tenant, roles=frozenset({"member"})),
        UUID(task_id),
        now=time.time() - tickets.ttl_s - 1,
    )

    response = await _refused(service, f"/api/v1/tasks/{task_id}/events?ticket={stale}")

    body = assert_problem(response, 401, "unauthorized")
    assert body["detail"] == "the stream ticket has expired"
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


async def test_a_tampered_ticket_is_refused(service: Service, tenant: str) -> None:
    """A member's ticket whose roles were raised to tenant_admin's does not verify."""
    async with service.client(tenant) as client:
        task_id = await _finished_task(service, client)
        ticket = (await _ticket(client, task_id))["ticket"]
    body, _, signature = ticket.partition(".")
    payload = _decoded(body).replace(b'"member"', b'"tenant_admin"')
    forged = f"{_encoded(payload)}.{signature}"

    responses = [
        await _refused(service, f"/api/v1/tasks/{task_id}/events?ticket={candidate}")
        for candidate in (forged, f"{body}.{signature[:-4]}AAAA", "not-a-ticket", "")
    ]

    details = [assert_problem(r, 401, "unauthorized")["detail"] for r in responses]
    assert details == [
        "the stream ticket's signature is invalid",
        "the stream ticket's signature is invalid",
        "the stream ticket's signature is invalid",
        "a bearer token is required",  # an empty ticket is no ticket
    ]


async def test_a_ticket_opens_nothing_but_its_tasks_stream(service: Service, tenant: str) -> None:
    async with service.client(tenant) as client:
        task_id = await _finished_task(service, client)
        ticket = (await _ticket(client, task_id))["ticket"]
        elsewhere = [
            ("GET", f"/api/v1/tasks/{task_id}"),
            ("GET", f"/api/v1/tasks/{task_id}/chain"),
            ("POST", f"/api/v1/tasks/{task_id}/stream-ticket"),
            ("POST", f"/api/v1/tasks/{task_id}/cancel"),
            ("GET", "/api/v1/tasks"),
        ]
        async with service.client() as anonymous:
            refused = [
                await anonymous.request(method, f"{url}?ticket={ticket}")
                for method, url in elsewhere
            ]
            # With an Authorization header, the header is what counts.
            with_a_bad_header = await anonymous.get(
                f"/api/v1/tasks/{task_id}/events?ticket={ticket}",
                headers={"Authorization": "Bearer not-a-jwt"},
            )

    for response in refused:
        body = assert_problem(response, 401, "unauthorized")
        assert body["detail"] == "a bearer token is required"
    assert_problem(with_a_bad_header, 401, "unauthorized")


async def test_a_disabled_tenants_ticket_is_refused(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(tenant) as client:
        task_id = await _finished_task(service, client)
        ticket = await _ticket(client, task_id)
    async with service.client(other_tenant, sub="ops", roles=PLATFORM) as ops:
        disabled = await ops.patch(f"/api/v1/tenants/{tenant}", json={"status": "disabled"})
        assert disabled.status_code == 200, disabled.text
        try:
            response = await _refused(service, ticket["stream_url"])
        finally:
            await ops.patch(f"/api/v1/tenants/{tenant}", json={"status": "active"})

    # As for its tokens: the tenant is named as disabled.
    assert_problem(response, 403, "tenant-disabled")


async def test_a_ticket_stops_working_the_moment_its_api_key_is_revoked(
    service: Service, tenant: str
) -> None:
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        created = await admin.post(
            "/api/v1/api-keys", json={"name": "browser", "roles": ["member"]}
        )
        assert created.status_code == 201, created.text
        key = created.json()
        keyed = httpx.AsyncClient(
            base_url=service.base_url,
            headers={"Authorization": f"Bearer {key['secret']}"},
            timeout=30,
        )
        async with keyed:
            task_id = await _finished_task(service, keyed)
            ticket = await _ticket(keyed, task_id)
        opened = await _stream_with(service, ticket["stream_url"])
        revoked = await admin.delete(f"/api/v1/api-keys/{key['id']}")
        assert revoked.status_code in (200, 204), revoked.text
        refused = await _refused(service, ticket["stream_url"])

    assert opened[-1].event == "done"
    # Long before the ticket's own expiry.
    assert ticket_expiry(ticket) > time.time()
    assert assert_problem(refused, 401, "unauthorized")["detail"] == (
        "the API key the stream ticket was issued for was revoked"
    )


async def test_another_tenants_task_gets_no_ticket(
    service: Service, tenant: str, other_tenant: str
) -> None:
    async with service.client(other_tenant) as theirs:
        task_id = await _finished_task(service, theirs)
    async with service.client(tenant, roles=("tenant_admin",)) as mine:
        response = await mine.post(f"/api/v1/tasks/{task_id}/stream-ticket")

    assert_problem(response, 404, "not-found")
    assert "ticket" not in response.json()


def _decoded(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _encoded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
