"""The console's agents: an admin defines an agent, changes it into a new version and reads
the diff between the two versions; archiving asks first; a member reads agents but changes
nothing."""

import re

from playwright.async_api import Page, expect

from tests.api.helpers import define_agent
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.service import MODEL, Service

INSTRUCTIONS = "You answer questions about invoices.\nCite the invoice number.\nBe brief."
CHANGED = "You answer questions about invoices.\nCite the invoice number.\nBe brief and polite."


def _console_errors(page: Page) -> list[str]:
    """What the page logs as errors (none expected)."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


async def test_an_admin_creates_an_agent_edits_it_and_the_diff_shows_the_changed_lines(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = _console_errors(page)
    await sign_in(page, service, await create_key(service, tenant, "tenant_admin"), "/agents")

    await page.get_by_role("button", name="New agent").click()
    await page.get_by_label(re.compile("^Name")).fill("billing")
    await page.get_by_label("Description").fill("Answers billing questions.")
    await page.get_by_label("Instructions").fill(INSTRUCTIONS)
    await page.get_by_label(re.compile("^Model")).select_option(MODEL)
    await page.get_by_label("Every tool this tenant enables").uncheck()
    await page.get_by_label(re.compile("^calculator")).check()
    await page.get_by_label("Temperature").fill("0.2")
    await page.get_by_role("button", name="Create agent").click()

    await expect(page).to_have_url(console_url(service, "/agents/billing"), timeout=WAIT_MS)
    await expect(page.get_by_role("heading", level=1)).to_contain_text("billing")
    await expect(page.locator(".agent-instructions")).to_have_text(INSTRUCTIONS)
    await expect(page.get_by_text("Only one version so far")).to_be_visible()

    # A new version: other instructions, one more tool.
    await page.get_by_role("button", name="Edit → new version").click()
    await expect(page.get_by_label("Instructions")).to_have_value(INSTRUCTIONS)
    await page.get_by_label("Instructions").fill(CHANGED)
    await page.get_by_label(re.compile("^current_time")).check()
    await page.get_by_role("button", name="Save new version").click()

    await expect(page.get_by_role("status")).to_contain_text("Version 2 saved", timeout=WAIT_MS)
    history = page.get_by_role("table", name="Version history")
    await expect(history.get_by_role("row")).to_have_count(3)  # the header, v2, v1
    await expect(history.get_by_role("row").nth(1)).to_contain_text("v2")
    await expect(history.get_by_role("row").nth(2)).to_contain_text("v1")

    diff = page.get_by_role("table", name="Changes from version 1 to version 2")
    await expect(diff.get_by_role("deletion")).to_have_text(["tools: calculator", "Be brief."])
    await expect(diff.get_by_role("insertion")).to_have_text(
        ["tools: calculator, current_time", "Be brief and polite."]
    )
    await expect(diff.locator("tr.diff-line.removed .diff-marker")).to_have_text(["-", "-"])
    await expect(diff.locator("tr.diff-line.added .diff-marker")).to_have_text(["+", "+"])

    # The console changed what the API holds.
    latest = await api_json(service, tenant, "/api/v1/agents/billing")
    assert latest["version"] == 2
    assert latest["instructions"] == CHANGED
    assert latest["tools"] == ["calculator", "current_time"]
    first = await api_json(service, tenant, "/api/v1/agents/billing/versions/1")
    assert (first["instructions"], first["tools"]) == (INSTRUCTIONS, ["calculator"])
    assert first["model"] == latest["model"] == MODEL
    assert first["temperature"] == latest["temperature"] == 0.2
    assert errors == []


async def test_archiving_an_agent_asks_first(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = _console_errors(page)
    await define_agent(service, tenant, "triage", instructions="Sort the tickets.")
    await sign_in(
        page, service, await create_key(service, tenant, "tenant_admin"), "/agents/triage"
    )

    await page.get_by_role("button", name="Archive", exact=True).click()
    confirm = page.get_by_role("group", name="Confirm archiving")
    await expect(confirm).to_contain_text("New tasks naming it will be refused")
    await confirm.get_by_role("button", name="Keep it").click()
    await expect(confirm).to_be_hidden()
    assert (await api_json(service, tenant, "/api/v1/agents/triage"))["status"] == "active"

    await page.get_by_role("button", name="Archive", exact=True).click()
    await page.get_by_role("button", name="Archive agent").click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text("archived", timeout=WAIT_MS)
    await expect(page.get_by_role("button", name="Edit → new version")).to_have_count(0)
    assert (await api_json(service, tenant, "/api/v1/agents/triage"))["status"] == "archived"
    assert errors == []


async def test_a_member_reads_agents_but_sees_no_edit_or_archive_actions(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = _console_errors(page)
    await define_agent(service, tenant, "billing", instructions=INSTRUCTIONS, tools=["calculator"])
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.patch("/api/v1/agents/billing", json={"instructions": CHANGED})
    assert response.status_code == 200, response.text
    await sign_in(page, service, await create_key(service, tenant, "member"), "/agents")

    table = page.get_by_role("table")
    await expect(table.get_by_role("link", name="billing")).to_be_visible(timeout=WAIT_MS)
    await expect(page.get_by_role("button", name="New agent")).to_have_count(0)

    await table.get_by_role("link", name="billing").click()
    diff = page.get_by_role("table", name="Changes from version 1 to version 2")
    await expect(diff.get_by_role("deletion")).to_have_text(["Be brief."], timeout=WAIT_MS)
    await expect(diff.get_by_role("insertion")).to_have_text(["Be brief and polite."])
    await expect(page.get_by_role("button", name="Edit → new version")).to_have_count(0)
    await expect(page.get_by_role("button", name="Archive", exact=True)).to_have_count(0)
    assert errors == []
