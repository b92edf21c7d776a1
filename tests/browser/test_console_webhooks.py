"""The console's Webhooks tab: an admin adds an endpoint (its secret shown once), a task's end
is delivered to a receiver on 127.0.0.1 and listed with its attempts, a redelivery sends it
again with the same webhook-id, and the endpoint is paused and deleted."""

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import expect

from tests.api.helpers import open_network, stream, submit
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, console_url, create_key, sign_in
from tests.browser.test_console_settings import problems_of, shot
from tests.fakes.openai_server import Reply
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.service import MODEL, Service


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as server:
        yield server


async def test_an_admin_adds_a_webhook_sees_its_deliveries_redelivers_pauses_and_deletes_it(
    service: Service, tenant: str, offline_page: OfflinePage, receiver: WebhookReceiver
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    await open_network(service, tenant, ["127.0.0.1/32"])
    await sign_in(
        page, service, await create_key(service, tenant, "tenant_admin", name="admin"), "/settings"
    )
    await page.get_by_role("tab", name="Webhooks").click()
    await expect(page).to_have_url(console_url(service, "/settings?section=webhooks"))

    form = page.get_by_role("form", name="Add a webhook")
    # A private address the tenant did not allow: the API's field error beside the field.
    await form.get_by_label("URL").fill("http://10.9.8.7/hook")
    await form.get_by_role("button", name="Add webhook").click()
    await expect(form).to_contain_text("10.9.8.7", timeout=WAIT_MS)

    await form.get_by_label("URL").fill(receiver.url())
    await form.get_by_role("button", name="Add webhook").click()
    shown = page.get_by_role("region", name="New webhook secret")
    await expect(shown).to_contain_text("shown only this once", timeout=WAIT_MS)
    secret = await shown.get_by_label("Webhook signing secret").input_value()
    assert secret.startswith("whsec_")
    receiver.secrets["/hook"] = secret
    await shot(page, "webhook-created")
    await shown.get_by_role("button", name="Done, I have saved it").click()
    assert secret not in await page.content()

    service.fake_llm.script(MODEL, Reply.text("Done."))
    async with service.client(tenant) as alice:
        await stream(alice, (await submit(alice))["task_id"])
    [first] = await receiver.wait_for(1)
    assert first.verified is True
    assert service.state.webhooks is not None
    await service.state.webhooks.dispatcher.settled()

    row = page.get_by_role("row").filter(has_text=receiver.url())
    await row.get_by_role("button", name="Deliveries").click()
    delivery = page.get_by_role("row").filter(has=page.get_by_role("button", name="Attempts"))
    await expect(delivery).to_contain_text("task.completed", timeout=WAIT_MS)
    await expect(delivery).to_contain_text("delivered")
    await delivery.get_by_role("button", name="Attempts").click()
    await expect(
        page.get_by_role("list", name=f"Attempts of delivery {first.webhook_id}")
    ).to_contain_text("#1", timeout=WAIT_MS)
    await delivery.get_by_role(
        "button", name=f"Redeliver task.completed {first.webhook_id}"
    ).click()
    [_, again] = await receiver.wait_for(2)
    assert again.webhook_id == first.webhook_id
    assert again.verified is True
    await expect(page.get_by_role("status").filter(has_text="Sent again")).to_be_visible(
        timeout=WAIT_MS
    )
    await shot(page, "webhook-deliveries")

    await row.get_by_role("button", name="Pause").click()
    await expect(row).to_contain_text("paused", timeout=WAIT_MS)
    await row.get_by_role("button", name=f"Delete webhook {receiver.url()}").click()
    await page.get_by_role("button", name="Delete webhook", exact=True).click()
    await expect(page.get_by_role("row").filter(has_text=receiver.url())).to_have_count(
        0, timeout=WAIT_MS
    )
    # The one refusal asked for (the private address) is the only failed request.
    assert [error for error in errors if "status of 422" not in error] == []
