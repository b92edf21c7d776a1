"""The console on a phone (390 × 844): the navigation folds into a menu button that opens and
closes by mouse and keyboard and navigates; the content takes the whole width; the tasks list,
a finished task's chain (nested sub-agents, long tool arguments and results), every settings
tab and a webhook's deliveries fit the screen: the page never scrolls sideways and each action
button lies wholly on screen and answers a click. At 1280 px the sidebar is back as it was."""

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Locator, Page, ViewportSize, expect

from tests.api.helpers import define_agent, open_network, stream, submit
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.browser.test_console_settings import problems_of
from tests.fakes.openai_server import Reply, ToolCall
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.service import MODEL, Service

PHONE = ViewportSize(width=390, height=844)
DESKTOP = ViewportSize(width=1280, height=900)
# Long unbroken values, as tools get and give them: they must wrap or scroll in their box.
SOURCE = "https://docs.example.com/physics/" + "boiling-point-of-water-" * 8 + "at-sea-level"
EXPRESSION = "9" * 300 + " * 3"
# The model calls of run_family's task: the lead's two, the researcher's three, the checker's.
FAMILY_CALLS = 6
RESEARCHED = f"Water boils at 100 °C at sea level, see {SOURCE}"

# What on the page breaks a narrow screen, as sentences: a page that scrolls sideways; an
# element sticking out of the screen with nothing around it that scrolls or clips it; a
# button not wholly on screen and inside every box that clips it.
LAYOUT_PROBLEMS = """() => {
  const width = window.innerWidth;
  const problems = [];
  const scrolled = document.documentElement.scrollWidth;
  if (scrolled > width) problems.push(`the page is ${scrolled} px wide in ${width}`);
  const name = (element) => {
    const classes = typeof element.className === "string" ? element.className.trim() : "";
    const text = (element.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 40);
    return `<${element.tagName.toLowerCase()}${classes ? ` class="${classes}"` : ""}> "${text}"`;
  };
  const clippers = (element) => {
    const found = [];
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") found.push(up);
    }
    return found;
  };
  for (const element of document.body.querySelectorAll("*")) {
    if (element.getClientRects().length === 0) continue;
    const style = getComputedStyle(element);
    if (style.visibility === "hidden") continue;
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    const where = `${Math.round(box.left)}..${Math.round(box.right)}`;
    if (element.matches("button")) {
      const boxes = clippers(element).map((up) => up.getBoundingClientRect());
      boxes.push({ left: 0, right: width });
      if (boxes.some((outer) => box.left < outer.left - 0.5 || box.right > outer.right + 0.5)) {
        problems.push(`button ${name(element)} at ${where} is not wholly shown`);
      }
    } else if ((box.left < -0.5 || box.right > width + 0.5) && clippers(element).length === 0) {
      problems.push(`${name(element)} at ${where} sticks out of the screen`);
    }
  }
  return problems;
}"""


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as server:
        yield server


async def fits(page: Page, what: str) -> None:
    """`what` fits the phone's screen (see LAYOUT_PROBLEMS); photographed whole."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / f"narrow-{what}.png", full_page=True)
    problems: list[str] = await page.evaluate(LAYOUT_PROBLEMS)
    assert problems == [], f"{what} does not fit {PHONE['width']} px: {problems}"


async def on_screen(button: Locator) -> None:
    """`button` lies wholly within the screen's width."""
    await button.scroll_into_view_if_needed()
    box = await button.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= PHONE["width"], box


async def run_family(service: Service, tenant: str) -> str:
    """A lead asks a researcher, who calculates and asks a checker: a finished task with nested
    sub-agents and long arguments and results. Its id."""
    await define_agent(service, tenant, "checker", description="Checks facts.", tools=[])
    await define_agent(
        service,
        tenant,
        "researcher",
        description="Finds facts.",
        tools=["calculator", "agent:checker"],
    )
    await define_agent(service, tenant, "lead", tools=["agent:researcher"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__researcher", {"task": f"Read {SOURCE} and sum up."})]),
        Reply.tool_calls([ToolCall("calculator", {"expression": EXPRESSION})]),
        Reply.tool_calls([ToolCall("agent__checker", {"task": f"Is this right? {SOURCE}"})]),
        Reply.text("Confirmed: 100 °C at sea level."),
        Reply.text(RESEARCHED),
        Reply.text("Done: water boils at 100 °C."),
    )
    async with service.client(tenant) as client:
        task_id: str = (await submit(client, input="When does water boil?", agent="lead"))[
            "task_id"
        ]
        await stream(client, task_id)
    return task_id


async def add_settings(service: Service, tenant: str, receiver: WebhookReceiver) -> None:
    """A secret, an MCP server the service cannot reach and a webhook endpoint with a long
    URL: rows with actions in the settings' tables."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        secret = await admin.put(
            f"/api/v1/tenants/{tenant}/secrets/A_RATHER_LONG_SECRET_NAME_FOR_A_TOOL",
            json={"value": "s3cret"},
        )
        assert secret.status_code == 201, secret.text
        server = await admin.post(
            f"/api/v1/tenants/{tenant}/mcp-servers",
            json={"name": "broken", "url": "http://127.0.0.1:9/mcp/" + "deep/" * 12},
        )
        assert server.status_code == 201, server.text
        hook = await admin.post(
            f"/api/v1/tenants/{tenant}/webhooks",
            json={"url": receiver.url("/hooks/" + "omniforge-" * 8), "events": ["task.completed"]},
        )
        assert hook.status_code == 201, hook.text


def menu_button(page: Page) -> Locator:
    return page.get_by_role("navigation", name="Console").get_by_role("button", name="Menu")


async def test_the_console_fits_a_phone_and_its_menu_opens_closes_and_navigates(
    service: Service,
    tenant: str,
    offline_page: OfflinePage,
    receiver: WebhookReceiver,
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    await open_network(service, tenant, ["127.0.0.1/32"])
    await add_settings(service, tenant, receiver)
    family_id = await run_family(service, tenant)
    await receiver.wait_for(1)
    assert service.state.webhooks is not None
    await service.state.webhooks.dispatcher.settled()
    chain = await api_json(service, tenant, f"/api/v1/tasks/{family_id}/chain")
    # Never set: the run waits for its model until it is cancelled from the list.
    service.fake_llm.script(MODEL, Reply.text("never", gate=asyncio.Event()))
    async with service.client(tenant) as client:
        running_id: str = (await submit(client, input="A long job, cancelled on the phone."))[
            "task_id"
        ]
    await service.fake_llm.wait_for_requests(FAMILY_CALLS + 1, MODEL)
    await page.set_viewport_size(PHONE)
    await sign_in(page, service, await create_key(service, tenant, "tenant_admin"), "/tasks")

    # Folded: the menu button alone, and the content as wide as the screen.
    navigation = page.get_by_role("navigation", name="Console")
    button = menu_button(page)
    await expect(button).to_be_visible()
    await expect(button).to_have_attribute("aria-expanded", "false")
    menu = page.locator(f"#{await button.get_attribute('aria-controls')}")
    await expect(menu).to_be_hidden()
    await expect(navigation.get_by_role("link", name="Tasks")).to_be_hidden()
    content = await page.locator("main").bounding_box()
    assert content is not None
    assert (content["x"], content["width"]) == (0, PHONE["width"])

    # The tasks, a running one cancelled from its row.
    row = page.locator(f'tr[data-task-id="{running_id}"]')
    await expect(row.locator(".status")).to_have_text("working", timeout=WAIT_MS)
    await expect(page.locator(f'tr[data-task-id="{family_id}"]')).to_be_visible()
    await fits(page, "tasks")
    cancel = row.get_by_role("button", name=f"Cancel task {running_id[:8]}")
    await on_screen(cancel)
    await cancel.click()
    await expect(row.locator(".status")).to_have_text("cancelled", timeout=WAIT_MS)

    # The menu by keyboard: opened, its links next in the tab order, closed with Escape (the
    # focus back on its button).
    await button.focus()
    await page.keyboard.press("Enter")
    await expect(button).to_have_attribute("aria-expanded", "true")
    await expect(menu).to_be_visible()
    await expect(navigation.get_by_role("link", name="Settings")).to_be_visible()
    await fits(page, "menu-open")
    await page.keyboard.press("Tab")
    await expect(menu.get_by_role("link", name="Tasks")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(button).to_have_attribute("aria-expanded", "false")
    await expect(menu).to_be_hidden()
    await expect(button).to_be_focused()
    # By pointer: opened, and a link followed closes it.
    await button.click()
    await expect(button).to_have_attribute("aria-expanded", "true")
    await navigation.get_by_role("link", name="Settings").click()
    await expect(page).to_have_url(re.compile(r"/console/settings$"))
    await expect(button).to_have_attribute("aria-expanded", "false")
    await expect(menu).to_be_hidden()

    # Every settings tab, each once what it reads has come.
    panel = page.get_by_role("tabpanel")
    seeded = {
        "secrets": page.get_by_role("row").filter(has_text="A_RATHER_LONG_SECRET_NAME"),
        "mcp": page.get_by_role("row").filter(has_text="broken"),
        "keys": page.get_by_role("row").filter(has_text="this session"),
        "webhooks": page.get_by_role("row").filter(has_text="omniforge-omniforge"),
    }
    tabs = page.get_by_role("tab")
    await expect(tabs).to_have_count(8, timeout=WAIT_MS)
    for index in range(8):
        tab = tabs.nth(index)
        await on_screen(tab)
        await tab.click()
        await expect(tab).to_have_attribute("aria-selected", "true")
        section = re.search(r"section=([a-z]+)", page.url)
        assert section is not None
        if section[1] in seeded:
            await expect(seeded[section[1]]).to_be_visible(timeout=WAIT_MS)
        await expect(panel.locator(".loading")).to_have_count(0, timeout=WAIT_MS)
        await fits(page, f"settings-{section[1]}")

    # The webhook's deliveries and a delivery's attempts.
    await page.get_by_role("tab", name="Webhooks").click()
    await expect(page).to_have_url(console_url(service, "/settings?section=webhooks"))
    deliveries = seeded["webhooks"].get_by_role("button", name="Deliveries")
    await on_screen(deliveries)
    await deliveries.click()
    delivery = page.get_by_role("row").filter(has=page.get_by_role("button", name="Attempts"))
    await expect(delivery.first).to_contain_text("task.completed", timeout=WAIT_MS)
    attempts = delivery.first.get_by_role("button", name="Attempts")
    await on_screen(attempts)
    await attempts.click()
    await expect(
        page.get_by_role("list", name=re.compile("^Attempts of delivery"))
    ).to_contain_text("#1", timeout=WAIT_MS)
    await on_screen(delivery.first.get_by_role("button", name=re.compile("^Redeliver")))
    await fits(page, "webhook-deliveries")

    # A finished task's chain, its sub-agents opened two deep.
    await menu_button(page).click()
    await navigation.get_by_role("link", name="Tasks").click()
    await page.get_by_role("link", name=family_id[:8]).click()
    await expect(page).to_have_url(re.compile(f"/console/tasks/{family_id}$"), timeout=WAIT_MS)
    own = page.locator("[data-step-type]:not([data-child-chain] [data-step-type])")
    await expect(own).to_have_count(len(chain["steps"]), timeout=WAIT_MS)
    researcher = page.get_by_role("group", name="Sub-agent researcher", exact=True)
    await researcher.locator(":scope > details > summary").click()
    calculated = researcher.locator('li[data-tool="calculator"] [data-step-type="tool_result"]')
    await expect(calculated).to_contain_text(EXPRESSION, timeout=WAIT_MS)  # echoed
    checker = researcher.get_by_role("group", name="Sub-agent checker", exact=True)
    await checker.locator(":scope > details > summary").click()
    await expect(checker.locator('[data-step-type="tool_result"]').first).to_be_visible(
        timeout=WAIT_MS
    )
    for arguments in await page.locator("details.arguments > summary").all():
        await arguments.click()
    await expect(page.locator("details.arguments:not([open])")).to_have_count(0)
    await expect(page.locator('[data-answer="final"]')).to_have_text("Done: water boils at 100 °C.")
    await fits(page, "task-chain")

    # Its delete button, on screen, asks in place; the question fits too.
    erase = page.get_by_role("button", name="Delete task")
    await on_screen(erase)
    await erase.click()
    question = page.get_by_role("group", name=re.compile("^Delete this task for good"))
    await on_screen(question.get_by_role("button", name="Delete for good"))
    await fits(page, "task-delete-asked")
    await question.get_by_role("button", name="Cancel").click()
    await expect(erase).to_be_visible()

    # On a desktop, the sidebar as before: no menu button, the links shown beside the page.
    await page.set_viewport_size(DESKTOP)
    await expect(menu_button(page)).to_be_hidden()
    await expect(navigation.get_by_role("link", name="Tasks")).to_be_visible()
    sidebar = await navigation.bounding_box()
    content = await page.locator("main").bounding_box()
    assert sidebar is not None
    assert content is not None
    assert (sidebar["x"], sidebar["width"]) == (0, 220)
    assert (content["x"], content["width"]) == (220, DESKTOP["width"] - 220)
    assert errors == []
