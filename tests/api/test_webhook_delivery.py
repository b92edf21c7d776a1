"""Webhook deliveries as a receiver sees them when things go wrong: a receiver failing twice
then succeeding gets the same delivery three times (the same `webhook-id`, each attempt
stored); one that keeps failing is given up once the retry window closes; and a server killed
(SIGKILL) while it sends still delivers once it is started again."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from tests.api.helpers import open_network, stream, submit
from tests.cluster import cluster
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.service import MODEL, Service, running_service, service_settings

ADMIN = {"sub": "root", "roles": ("tenant_admin",)}
# Short waits between attempts, so that retries come within the test; the window closes
# after 3 s.
FAST_RETRIES: dict[str, Any] = {
    "webhook_retry_initial_s": 0.05,
    "webhook_retry_max_s": 0.2,
    "webhook_retry_for_s": 3.0,
}


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as server:
        yield server


@pytest.fixture
async def quick(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> AsyncIterator[Service]:
    """A service of its own whose webhooks are retried within moments."""
    settings = service_settings(tmp_path, own_database_url, fake_llm, **FAST_RETRIES)
    async with running_service(settings, fake_llm) as service:
        yield service


async def hooked_tenant(service: Service, receiver: WebhookReceiver) -> tuple[str, str]:
    """A tenant that may reach 127.0.0.1, with an endpoint there for `task.completed`."""
    tenant = await service.create_tenant(f"w-{uuid4().hex[:12]}")
    await open_network(service, tenant, ["127.0.0.1/32"])
    async with service.client(tenant, **ADMIN) as admin:
        created = await admin.post(
            f"/api/v1/tenants/{tenant}/webhooks",
            json={"url": receiver.url(), "events": ["task.completed"]},
        )
    assert created.status_code == 201, created.text
    receiver.secrets["/hook"] = created.json()["secret"]
    return tenant, created.json()["id"]


async def run_one_task(service: Service, tenant: str) -> str:
    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with service.client(tenant) as alice:
        accepted = await submit(alice)
        await stream(alice, accepted["task_id"])
    task_id: str = accepted["task_id"]
    return task_id


async def delivery_of(service: Service, tenant: str, endpoint: str) -> dict[str, Any]:
    assert service.state.webhooks is not None
    await service.state.webhooks.dispatcher.settled()
    base = f"/api/v1/tenants/{tenant}"
    async with service.client(tenant, **ADMIN) as admin:
        [item] = (await admin.get(f"{base}/webhooks/{endpoint}/deliveries")).json()["items"]
        detail: dict[str, Any] = (await admin.get(f"{base}/webhook-deliveries/{item['id']}")).json()
    return detail


async def recorded(client: Any, url: str) -> dict[str, Any]:
    """The delivery once its outcome is stored: another process records it after the receiver
    answered, and nothing tells this one, so its state is read until then (with a deadline)."""
    async with asyncio.timeout(10):
        while True:
            detail: dict[str, Any] = (await client.get(url)).json()
            if detail["status"] != "pending":
                return detail
            await asyncio.sleep(0.05)


async def test_a_receiver_failing_twice_then_succeeding_gets_the_same_delivery_three_times(
    quick: Service, receiver: WebhookReceiver
) -> None:
    tenant, endpoint = await hooked_tenant(quick, receiver)
    receiver.answer(500, 503)
    await run_one_task(quick, tenant)
    received = await receiver.wait_for(3)
    delivery = await delivery_of(quick, tenant, endpoint)

    assert len({r.webhook_id for r in received}) == 1
    assert all(r.verified for r in received)
    assert len({r.body for r in received}) == 1  # the same body, signed at each attempt
    assert delivery["id"] == received[0].webhook_id
    assert delivery["status"] == "delivered"
    assert delivery["attempts"] == 3
    attempts = delivery["attempt_list"]
    assert [a["number"] for a in attempts] == [1, 2, 3]
    assert [a["status_code"] for a in attempts] == [500, 503, 200]
    assert [a["error"] is None for a in attempts] == [False, False, True]
    assert "HTTP 500" in attempts[0]["error"]
    assert attempts[0]["response"] == "answered 500"
    assert len(receiver.received) == 3


async def test_a_delivery_is_given_up_once_its_retry_window_closes(
    quick: Service, receiver: WebhookReceiver
) -> None:
    tenant, endpoint = await hooked_tenant(quick, receiver)
    receiver.answer(*[500] * 1000)
    await run_one_task(quick, tenant)
    await receiver.wait_for(3)
    assert quick.state.webhooks is not None
    dispatcher = quick.state.webhooks.dispatcher
    # Each failure schedules the next attempt until one falls past the window: then the
    # delivery is `failed` and nothing more is due (the dispatcher's store says so).
    delivery = await delivery_of(quick, tenant, endpoint)
    while delivery["status"] == "pending":  # the attempt after those recorded is coming
        await receiver.wait_for(len(delivery["attempt_list"]) + 1)
        delivery = await delivery_of(quick, tenant, endpoint)
    assert delivery["status"] == "failed"
    assert delivery["next_attempt_at"] is None
    assert delivery["attempts"] == len(delivery["attempt_list"]) >= 3
    assert all(a["status_code"] == 500 for a in delivery["attempt_list"])
    await dispatcher.settled()


async def test_a_server_killed_while_sending_delivers_after_its_restart(
    own_database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, receiver: WebhookReceiver
) -> None:
    env = {
        "OMNIFORGE_NETWORK_ALLOW": "127.0.0.1/32",
        # An attempt's claim lasts its timeout and a second: then another instance may send.
        "OMNIFORGE_WEBHOOK_TIMEOUT_S": "1",
    }
    async with cluster(own_database_url, tmp_path, fake_llm, **env) as group:
        admin_token = group.token_for("root", ("tenant_admin",))
        a = await group.instance("a")
        async with a.client(admin_token) as admin:
            created = await admin.post(
                f"/api/v1/tenants/{group.tenant}/webhooks",
                json={"url": receiver.url(), "events": ["task.completed"]},
            )
            assert created.status_code == 201, created.text
            receiver.secrets["/hook"] = created.json()["secret"]
            # The receiver takes the first attempt and never answers it.
            held = receiver.hold()
            fake_llm.script(MODEL, Reply.text("Done."))
            accepted = await submit(admin)
            [first] = await receiver.wait_for(1)
        await a.kill()  # stored, being sent, no outcome recorded
        held.set()

        b = await group.instance("b")
        [_, second] = await receiver.wait_for(2)
        async with b.client(admin_token) as admin:
            base = f"/api/v1/tenants/{group.tenant}"
            [item] = (await admin.get(f"{base}/webhook-deliveries")).json()["items"]
            detail = await recorded(admin, f"{base}/webhook-deliveries/{item['id']}")

    assert first.json["data"]["task_id"] == accepted["task_id"]
    assert second.webhook_id == first.webhook_id == item["id"]
    assert second.verified is True
    assert second.body == first.body
    assert detail["status"] == "delivered"
    # The killed attempt left no record; the one after the restart did.
    assert [(x["number"], x["status_code"]) for x in detail["attempt_list"]] == [(2, 200)]
