"""The console's erasure and retention: a tenant admin deletes a task from its page and a
conversation from its view (each asked for in place first), and sets how long the tenant's
data is kept in the settings."""

from playwright.async_api import expect

from tests.api.helpers import stream, submit
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service


async def test_an_admin_deletes_a_task_and_a_conversation_after_confirming(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    service.fake_llm.script(MODEL, Reply.text("Forty-two."), Reply.text("Hello there."))
    async with service.client(tenant) as alice:
        task_id = (await submit(alice, input="The answer?"))["task_id"]
        await stream(alice, task_id)
        conversation = (await alice.post("/api/v1/conversations", json={})).json()["id"]
        turn = await submit(alice, input="Hi", conversation_id=conversation)
        await stream(alice, turn["task_id"])

    admin = await create_key(service, tenant, "tenant_admin", name="admin")
    await sign_in(page, service, admin, f"/tasks/{task_id}")
    await expect(page.get_by_text("Forty-two.").first).to_be_visible(timeout=WAIT_MS)
    await page.get_by_role("button", name="Delete task").click()
    question = page.get_by_role("group", name="Delete this task for good")
    await expect(question).to_contain_text("A running task is cancelled first.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / "erasure-task-confirm.png", full_page=True)
    await question.get_by_role("button", name="Delete for good").click()
    await expect(page).to_have_url(console_url(service, "/tasks"), timeout=WAIT_MS)
    tasks = await api_json(service, tenant, "/api/v1/tasks")
    assert task_id not in [task["id"] for task in tasks["items"]]

    await page.goto(console_url(service, f"/conversations/{conversation}"))
    await expect(page.get_by_text("Hello there.").first).to_be_visible(timeout=WAIT_MS)
    await page.get_by_role("button", name="Delete conversation").click()
    await page.get_by_role("button", name="Delete for good").click()
    await expect(page).to_have_url(console_url(service, "/conversations"), timeout=WAIT_MS)
    conversations = await api_json(service, tenant, "/api/v1/conversations")
    assert conversations["items"] == []


async def test_an_admin_sets_the_retention_in_the_settings(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    admin = await create_key(service, tenant, "tenant_admin", name="admin")
    await sign_in(page, service, admin, "/settings?section=retention")
    form = page.get_by_role("form", name="Retention")
    days = form.get_by_label("Tasks, conversations and files (days)")
    await expect(days).to_have_attribute("placeholder", "default (90)", timeout=WAIT_MS)
    await days.fill("0")
    await form.get_by_role("button", name="Save retention").click()
    await expect(form.get_by_text("greater than or equal to 1")).to_be_visible(timeout=WAIT_MS)
    await days.fill("30")
    await form.get_by_label("Audit events (days)").fill("730")
    await form.get_by_role("button", name="Save retention").click()
    await expect(page.get_by_role("status").filter(has_text="Retention saved.")).to_be_visible(
        timeout=WAIT_MS
    )
    await page.screenshot(path=SCREENSHOTS / "settings-retention.png", full_page=True)
    stored = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/retention")
    assert stored == {
        "retention_days": 30,
        "audit_retention_days": 730,
        "effective_retention_days": 30,
        "effective_audit_retention_days": 730,
    }
