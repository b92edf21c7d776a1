"""Replays and forks in the console: from a finished task's page a person replays it (the new
task's page shows whether it reproduced the chain, or where it diverged and how) and forks it
from a step (the new task names its source, its recorded steps marked as such)."""

import re

from playwright.async_api import Page, expect

from tests.api.helpers import configure, define_agent, stream
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


async def new_task_id(page: Page, old: str) -> str:
    """The id of the task page the console went to from task `old`'s."""
    await expect(page).not_to_have_url(re.compile(f"/tasks/{old}$"), timeout=WAIT_MS)
    await expect(page).to_have_url(re.compile(r"/console/tasks/[0-9a-f-]{36}$"), timeout=WAIT_MS)
    return page.url.rsplit("/", 1)[1]


async def test_a_person_replays_and_forks_a_task_from_its_page(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await configure(service, tenant, "tools", {"enabled_tools": ["calculator"]})
    await define_agent(
        service, tenant, "adder", instructions="Add with care.", tools=["calculator"]
    )
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "2 + 3"}, id="c1")]),
        Reply.text("2 + 3 = 5."),
    )
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        submitted = await admin.post("/api/v1/tasks", json={"input": "2 + 3?", "agent": "adder"})
        source = submitted.json()["task_id"]
        await stream(admin, source)
        changed = await admin.patch("/api/v1/agents/adder", json={"instructions": "Add fast."})
        assert changed.status_code == 200, changed.text
    recorded = (await api_json(service, tenant, f"/api/v1/tasks/{source}/chain"))["steps"]
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{source}")

    # A replay with the same agent version reproduces the chain: every step "recorded".
    await page.get_by_text("Replay or fork this task").click()
    await page.get_by_role("form", name="Replay").get_by_role("button", name="Replay").click()
    await new_task_id(page, source)
    report = page.locator("[data-replay]")
    await expect(report).to_have_attribute("data-replay", "reproduced", timeout=WAIT_MS)
    await expect(report).to_contain_text(f"all {len(recorded)} recorded steps repeated")
    await expect(page.locator('[data-origin="replay"]')).to_contain_text(source[:8])
    await expect(page.locator(".badge.recorded")).to_have_count(len(recorded), timeout=WAIT_MS)

    # With the changed instructions it diverges at the first LLM call, and says how.
    await page.goto(console_url(service, f"/tasks/{source}"))
    await page.get_by_text("Replay or fork this task").click()
    await page.get_by_label("Agent version").fill("adder@2")
    await page.get_by_role("form", name="Replay").get_by_role("button", name="Replay").click()
    await new_task_id(page, source)
    report = page.locator("[data-replay]")
    await expect(report).to_have_attribute("data-replay", "diverged", timeout=WAIT_MS)
    await expect(report).to_contain_text("Diverged at step 1")
    await expect(report).to_contain_text("tool_call.arguments.messages.0.content")
    await expect(report).to_contain_text("Add with care.")
    await expect(report).to_contain_text("Add fast.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / "replay-diverged.png", full_page=True)

    # A fork after the calculator's result goes on live: one new LLM call.
    service.fake_llm.script(MODEL, Reply.text("Five."))
    await page.goto(console_url(service, f"/tasks/{source}"))
    await page.get_by_text("Replay or fork this task").click()
    form = page.get_by_role("form", name="Fork")
    await form.get_by_label("Fork after step").fill("4")
    await form.get_by_role("button", name="Fork").click()
    fork = await new_task_id(page, source)
    await expect(page.locator('[data-origin="fork"]')).to_contain_text("after step 4")
    await expect(page.locator('[data-answer="final"]')).to_contain_text("Five.", timeout=WAIT_MS)
    task = await api_json(service, tenant, f"/api/v1/tasks/{fork}")
    assert task["forked_from"] == source
    assert task["usage"]["llm_calls"] == 1
    assert task["started_at"] is not None
    assert len(service.fake_llm.requests_for(MODEL)) == 3
