"""Conversations in the console: a member starts one with an agent from the form, sends a
second turn from the message box, and reads both turns as chat bubbles; the second answer
types in live, piece by piece."""

import asyncio
import re

from playwright.async_api import expect

from tests.api.helpers import define_agent
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.browser.test_console_tasks import streamed_up_to
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

CONVERSATION_URL = re.compile(r".*/console/conversations/([0-9a-f-]{36})$")
FIRST = "Hello! I can help you plan the trip. Where would you like to go?"
SECOND = "Kyoto in autumn is lovely: the maples turn red in November. Book early."
PAUSE_AFTER = "red"


async def test_a_member_starts_a_conversation_and_the_second_answer_types_in_live(
    service: Service,
    tenant: str,
    offline_page: OfflinePage,
) -> None:
    page = offline_page.page
    errors: list[str] = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    await define_agent(service, tenant, "trip-planner", model=MODEL, tools=[])
    second, rest = asyncio.Event(), asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.text(FIRST, prompt_tokens=40, completion_tokens=16),
        Reply.text(
            SECOND,
            prompt_tokens=90,
            completion_tokens=24,
            gate=second,
            pause=(PAUSE_AFTER, rest),
        ),
    )
    await sign_in(page, service, await create_key(service, tenant, "member"), "/conversations")

    form = page.get_by_role("form", name="New conversation")
    await form.get_by_label("Agent").select_option("trip-planner")
    await form.get_by_label("First message").fill("Help me plan a trip.")
    await form.get_by_role("button", name="Start conversation").click()
    await expect(page).to_have_url(CONVERSATION_URL, timeout=WAIT_MS)
    conversation_id = CONVERSATION_URL.match(page.url).group(1)  # type: ignore[union-attr]

    turns = page.get_by_role("list", name="Turns").locator("li.turn")
    first = turns.nth(0)
    await expect(first.locator('[data-role="user"]')).to_have_text("Help me plan a trip.")
    await expect(first.locator('[data-role="agent"]')).to_have_text(FIRST, timeout=WAIT_MS)
    await expect(first).to_have_attribute("data-status", "completed")

    await page.get_by_label("Message", exact=True).fill("Somewhere in Japan, in autumn.")
    await page.get_by_role("button", name="Send").click()
    await expect(turns).to_have_count(2, timeout=WAIT_MS)
    latest = turns.nth(1)
    await expect(latest.locator('[data-role="user"]')).to_have_text(
        "Somewhere in Japan, in autumn."
    )
    await service.fake_llm.wait_for_requests(2, MODEL)
    second.set()
    # The answer so far, and nothing more, while the model holds back the rest.
    partial = streamed_up_to(SECOND, PAUSE_AFTER)
    await expect(latest.locator('[data-role="agent"]')).to_have_text(partial, timeout=WAIT_MS)
    assert SECOND not in await page.locator("main").inner_text()
    await expect(page.get_by_role("button", name="Send")).to_be_disabled()

    rest.set()
    await expect(latest).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    await expect(latest.locator('[data-role="agent"]')).to_have_text(SECOND)

    detail = await api_json(service, tenant, f"/api/v1/conversations/{conversation_id}")
    assert [turn["answer"] for turn in detail["turns"]] == [FIRST, SECOND]
    await expect(page.locator('[data-role="agent"]')).to_have_text([FIRST, SECOND])
    await expect(page.locator('[data-role="user"]')).to_have_text(
        ["Help me plan a trip.", "Somewhere in Japan, in autumn."]
    )
    for index, turn in enumerate(detail["turns"]):
        meta = turns.nth(index).locator(".turn-meta")
        await expect(meta).to_contain_text(f"{turn['usage']['total_tokens']} tokens")
        await expect(meta.get_by_role("link")).to_have_attribute(
            "href", re.compile(f"/console/tasks/{turn['task_id']}$")
        )

    # The list shows it with its two turns; its link leads back to the chat.
    await (
        page.get_by_role("navigation", name="Console")
        .get_by_role("link", name="Conversations")
        .click()
    )
    listed = page.get_by_role("table", name="Conversations").locator("tbody tr")
    await expect(listed).to_have_count(1, timeout=WAIT_MS)
    await expect(listed.locator("td")).to_have_text(
        [conversation_id[:8], "trip-planner", "2", re.compile(r".+"), re.compile(r".+")]
    )
    await listed.get_by_role("link", name=conversation_id[:8]).click()
    await expect(page.locator('[data-role="agent"]')).to_have_text([FIRST, SECOND], timeout=WAIT_MS)
    assert errors == []
