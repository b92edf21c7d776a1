"""Webhooks through the running service: endpoints registered over the API (their URLs through
the SSRF guard), runs' events delivered signed to a receiver on 127.0.0.1 that verifies them
with the `standardwebhooks` library, a task's one-off `webhook_url`, deliveries listed with
their attempts, and another tenant's ids unknown."""

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.api.helpers import (
    assert_invalid,
    assert_problem,
    configure,
    open_network,
    stream,
    submit,
)
from tests.fakes.openai_server import Reply, ToolCall
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.service import MODEL, Service

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as server:
        yield server


@pytest.fixture
async def hooked(service: Service) -> str:
    """A tenant whose network allow-list admits 127.0.0.1, where the receiver listens."""
    tenant = await service.create_tenant(f"w-{uuid4().hex[:12]}")
    await open_network(service, tenant, ["127.0.0.1/32"])
    return tenant


async def register(
    service: Service, tenant: str, receiver: WebhookReceiver, path: str, events: list[str]
) -> dict[str, Any]:
    """An endpoint at `path` of the receiver, which learns its secret to verify with."""
    async with service.client(tenant, **ADMIN) as admin:
        response = await admin.post(
            f"/api/v1/tenants/{tenant}/webhooks",
            json={"url": receiver.url(path), "events": events, "description": "test"},
        )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    assert created["secret"].startswith("whsec_")
    receiver.secrets[path] = created["secret"]
    return created


async def settled(service: Service) -> None:
    """Until the sends under way have stored how they went."""
    assert service.state.webhooks is not None
    await service.state.webhooks.dispatcher.settled()


async def test_a_completed_task_is_delivered_signed_to_the_endpoints_that_subscribe(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    done = await register(service, hooked, receiver, "/done", ["task.completed"])
    await register(service, hooked, receiver, "/failed", ["task.failed"])
    service.fake_llm.script(MODEL, Reply.text("42.", prompt_tokens=10, completion_tokens=5))
    async with service.client(hooked) as alice:
        accepted = await submit(alice)
        await stream(alice, accepted["task_id"])
    [delivery] = await receiver.wait_for(1)
    await settled(service)

    assert delivery.verified is True
    assert delivery.headers["content-type"] == "application/json"
    body = delivery.json
    assert body["type"] == "task.completed"
    assert body["data"]["task_id"] == accepted["task_id"]
    assert body["data"]["chain_id"] == accepted["chain_id"]
    assert body["data"]["status"] == "completed"
    assert body["data"]["answer"] == "42."
    assert body["data"]["final_answer"] == "42."  # the old name, deprecated, for one release
    assert body["data"]["usage"]["input_tokens"] == 10
    assert body["data"]["usage"]["output_tokens"] == 5
    assert len(receiver.received) == 1  # the other endpoint hears of failures only

    base = f"/api/v1/tenants/{hooked}"
    async with service.client(hooked, **ADMIN) as admin:
        listed = (await admin.get(f"{base}/webhooks/{done['id']}/deliveries")).json()["items"]
        [item] = listed
        assert item["id"] == delivery.webhook_id
        assert item["status"] == "delivered"
        assert item["event"] == "task.completed"
        assert item["payload"] == body
        one = (await admin.get(f"{base}/webhook-deliveries/{item['id']}")).json()
        [attempt] = one["attempt_list"]
        assert attempt["status_code"] == 200
        assert attempt["error"] is None
        assert attempt["response"] == "answered 200"
        endpoints = (await admin.get(f"{base}/webhooks")).json()["items"]
        assert {e["url"] for e in endpoints} == {receiver.url("/done"), receiver.url("/failed")}
        assert all("secret" not in e for e in endpoints)

        # Sent again by hand: the same webhook-id, signed anew.
        again = await admin.post(f"{base}/webhook-deliveries/{item['id']}/redeliver")
        assert again.status_code == 200, again.text
    second = (await receiver.wait_for(2))[1]
    assert second.webhook_id == delivery.webhook_id
    assert second.verified is True
    assert second.body == delivery.body


async def test_a_failed_task_is_delivered_as_task_failed_with_its_error(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    await register(service, hooked, receiver, "/failed", ["task.failed", "task.completed"])
    service.fake_llm.script(MODEL, Reply.error(500, "the provider is down"))
    async with service.client(hooked) as alice:
        accepted = await submit(alice)
        await stream(alice, accepted["task_id"])
    [delivery] = await receiver.wait_for(1)
    await settled(service)

    assert delivery.verified is True
    data = delivery.json["data"]
    assert delivery.json["type"] == "task.failed"
    assert data["status"] == "failed"
    assert data["error"]["code"] == "llm_error"
    assert "answer" not in data
    assert "final_answer" not in data


async def test_a_deliverys_cost_reads_as_the_rest_api_shows_it(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    await register(service, hooked, receiver, "/done", ["task.completed"])
    service.fake_llm.script(MODEL, Reply.text("42.", prompt_tokens=10, completion_tokens=5))
    async with service.client(hooked) as alice:
        accepted = await submit(alice)
        await stream(alice, accepted["task_id"])
        task = (await alice.get(f"/api/v1/tasks/{accepted['task_id']}")).json()
    [delivery] = await receiver.wait_for(1)
    await settled(service)

    assert delivery.json["data"]["usage"]["cost_usd"] == task["usage"]["total_cost_usd"]


async def test_a_wait_for_approval_is_delivered_as_task_input_required(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    await register(service, hooked, receiver, "/wait", ["task.input_required"])
    await configure(service, hooked, "approvals", {"tools": {"calculator": "always"}})
    service.fake_llm.script(
        MODEL, Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})])
    )
    async with service.client(hooked) as alice:
        accepted = await submit(alice)
        [delivery] = await receiver.wait_for(1)
        await service.state.runs.left(UUID(accepted["task_id"]))
        approvals = (await alice.get(f"/api/v1/tasks/{accepted['task_id']}/approvals")).json()
    await settled(service)

    assert delivery.verified is True
    assert delivery.json["type"] == "task.input_required"
    data = delivery.json["data"]
    assert data["status"] == "input_required"
    assert data["task_id"] == accepted["task_id"]
    [approval] = approvals["items"]
    assert data["approvals"] == [{"approval_id": approval["id"], "tool_name": "calculator"}]


async def test_a_budget_warning_is_delivered_once(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    await register(service, hooked, receiver, "/budget", ["budget.warning"])
    calculation = Reply.tool_calls([ToolCall("calculator", {"expression": "2 + 2"})])
    service.fake_llm.script(MODEL, *[calculation] * 4, Reply.text("done"))
    async with service.client(hooked) as alice:
        accepted = await submit(alice, budget={"max_llm_calls": 5})
        events = await stream(alice, accepted["task_id"])
    assert events[-1].json["final_state"] == "completed"
    [delivery] = await receiver.wait_for(1)
    await settled(service)

    assert len(receiver.received) == 1
    assert delivery.verified is True
    assert delivery.json["type"] == "budget.warning"
    assert delivery.json["data"]["limits"] == ["max_llm_calls"]
    assert delivery.json["data"]["usage"]["llm_calls"] == 4


async def test_a_tasks_own_webhook_url_gets_its_end_signed_with_the_tenants_task_secret(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    async with service.client(hooked, **ADMIN) as admin:
        secret = (await admin.get(f"/api/v1/tenants/{hooked}/webhooks/task-secret")).json()
    assert secret["secret"].startswith("whsec_")
    receiver.secrets["/task"] = secret["secret"]
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with service.client(hooked) as alice:
        accepted = await submit(alice, webhook_url=receiver.url("/task"))
        await stream(alice, accepted["task_id"])
    [delivery] = await receiver.wait_for(1)
    await settled(service)

    assert delivery.verified is True
    assert delivery.json["type"] == "task.completed"
    assert delivery.json["data"]["task_id"] == accepted["task_id"]
    async with service.client(hooked, **ADMIN) as admin:
        listed = await admin.get(
            f"/api/v1/tenants/{hooked}/webhook-deliveries",
            params={"one_off": "true", "task_id": accepted["task_id"]},
        )
        [item] = listed.json()["items"]
        assert item["webhook_id"] is None
        assert item["url"] == receiver.url("/task")
        assert item["status"] == "delivered"
        # A rotated secret signs what comes next; the old one no longer verifies.
        rotated = await admin.post(f"/api/v1/tenants/{hooked}/webhooks/task-secret/rotate")
        assert rotated.json()["secret"] != secret["secret"]
        await admin.post(f"/api/v1/tenants/{hooked}/webhook-deliveries/{item['id']}/redeliver")
    again = (await receiver.wait_for(2))[1]
    assert again.verified is False
    receiver.secrets["/task"] = rotated.json()["secret"]


async def test_private_addresses_are_refused_for_endpoints_and_task_webhooks(
    service: Service, tenant: str, hooked: str, receiver: WebhookReceiver
) -> None:
    async with service.client(hooked, **ADMIN) as admin:
        private = await admin.post(
            f"/api/v1/tenants/{hooked}/webhooks",
            json={"url": "http://10.1.2.3/hook", "events": ["task.completed"]},
        )
        metadata = await admin.post(
            f"/api/v1/tenants/{hooked}/webhooks",
            json={"url": "http://169.254.169.254/latest", "events": ["task.completed"]},
        )
        twice = await admin.post(
            f"/api/v1/tenants/{hooked}/webhooks",
            json={"url": receiver.url(), "events": ["task.failed", "task.failed"]},
        )
        task = await admin.post(
            "/api/v1/tasks", json={"input": "x", "webhook_url": "http://192.168.0.7/x"}
        )
    async with service.client(tenant, **ADMIN) as unlisted:
        loopback = await unlisted.post(
            f"/api/v1/tenants/{tenant}/webhooks",
            json={"url": receiver.url(), "events": ["task.completed"]},
        )
    assert "10.1.2.3" in assert_invalid(private, "body.url")["errors"][0]["message"]
    assert_invalid(metadata, "body.url")
    assert_invalid(twice, "body.events")
    assert "192.168.0.7" in assert_invalid(task, "body.webhook_url")["errors"][0]["message"]
    assert_invalid(loopback, "body.url")
    assert receiver.received == []


async def test_another_tenants_webhooks_and_deliveries_are_not_found(
    service: Service, hooked: str, other_tenant: str, receiver: WebhookReceiver
) -> None:
    created = await register(service, hooked, receiver, "/x", ["task.completed"])
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with service.client(hooked) as alice:
        accepted = await submit(alice)
        await stream(alice, accepted["task_id"])
    [delivery] = await receiver.wait_for(1)
    await settled(service)
    mine = f"/api/v1/tenants/{hooked}"
    theirs = f"/api/v1/tenants/{other_tenant}"
    hook, sent = created["id"], delivery.webhook_id
    async with (
        service.client(other_tenant, **ADMIN) as outsider,
        service.client(hooked) as member,
    ):
        # Naming the other tenant in the path, or its ids under one's own.
        for method, url in [
            ("GET", f"{mine}/webhooks"),
            ("GET", f"{mine}/webhooks/{hook}"),
            ("PATCH", f"{mine}/webhooks/{hook}"),
            ("DELETE", f"{mine}/webhooks/{hook}"),
            ("POST", f"{mine}/webhooks/{hook}/rotate-secret"),
            ("GET", f"{mine}/webhooks/{hook}/deliveries"),
            ("GET", f"{mine}/webhooks/task-secret"),
            ("GET", f"{mine}/webhook-deliveries/{sent}"),
            ("POST", f"{mine}/webhook-deliveries/{sent}/redeliver"),
            ("GET", f"{theirs}/webhooks/{hook}"),
            ("PATCH", f"{theirs}/webhooks/{hook}"),
            ("DELETE", f"{theirs}/webhooks/{hook}"),
            ("POST", f"{theirs}/webhooks/{hook}/rotate-secret"),
            ("GET", f"{theirs}/webhooks/{hook}/deliveries"),
            ("GET", f"{theirs}/webhook-deliveries/{sent}"),
            ("POST", f"{theirs}/webhook-deliveries/{sent}/redeliver"),
        ]:
            body = {"enabled": False} if method == "PATCH" else None
            response = await outsider.request(method, url, json=body)
            assert_problem(response, 404, "not-found")
        assert (await outsider.get(f"{theirs}/webhook-deliveries")).json()["items"] == []
        refused = await member.get(f"{mine}/webhooks")
        assert assert_problem(refused, 403, "forbidden")["permission"] == "webhook:configure"
    assert len(receiver.received) == 1  # no redelivery happened


async def test_a_paused_endpoint_gets_nothing_new_and_a_deleted_one_disappears(
    service: Service, hooked: str, receiver: WebhookReceiver
) -> None:
    created = await register(service, hooked, receiver, "/p", ["task.completed"])
    url = f"/api/v1/tenants/{hooked}/webhooks/{created['id']}"
    async with service.client(hooked, **ADMIN) as admin:
        paused = await admin.patch(url, json={"enabled": False})
        assert paused.json()["enabled"] is False
        service.fake_llm.script(MODEL, Reply.text("Done."))
        await stream(admin, (await submit(admin))["task_id"])
        assert (await admin.get(url + "/deliveries")).json()["items"] == []
        rotated = await admin.post(url + "/rotate-secret")
        assert rotated.json()["secret"] not in (created["secret"], None)
        assert (await admin.delete(url)).status_code == 204
        assert_problem(await admin.get(url), 404, "not-found")
    assert receiver.received == []
