"""The console's tasks: a member submits a task from the form and watches its chain on the task
page live — steps as they happen, the answer typing in piece by piece; the status filter
narrows the list; a running task is cancelled from the list and from its page."""

import asyncio
import re
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.api.helpers import define_agent, stream, submit
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

TASK_URL = re.compile(r".*/console/tasks/([0-9a-f-]{36})$")
ANSWER = "17 * 23 + 4 = 395, as the calculator says. That is the whole answer."
# The streamed answer stops after the chunk holding this word until the test lets it go on.
PAUSE_AFTER = "395,"


def streamed_up_to(text: str, after: str) -> str:
    """What of `text` the fake has streamed when it holds back after `after` (it streams a
    word with its following whitespace per chunk)."""
    words = re.split(r"(?<=\s)(?=\S)", text)
    for index, word in enumerate(words):
        if after in word:
            return "".join(words[: index + 1])
    raise AssertionError(f"{after!r} is not in {text!r}")


async def shown_steps(page: Page) -> list[tuple[int, str]]:
    """The steps the page shows: (step number, type), in step order."""
    shown = await page.locator("[data-step-type]").evaluate_all(
        "(steps) => steps.map((step) => [Number(step.dataset.stepNumber), step.dataset.stepType])"
    )
    return sorted((number, kind) for number, kind in shown)


def key_client(service: Service, key: str) -> httpx.AsyncClient:
    """The API as the holder of `key` calls it."""
    return httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def rows(page: Page) -> Any:
    return page.get_by_role("table", name="Tasks").locator("tbody tr")


async def test_a_member_submits_a_task_and_watches_its_steps_and_answer_arrive_live(
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
    await define_agent(service, tenant, "calc-bot", model=MODEL, tools=["calculator"])
    answer, rest = asyncio.Event(), asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("calculator", {"expression": "17 * 23 + 4"}, id="c1")],
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply.text(
            ANSWER,
            prompt_tokens=200,
            completion_tokens=30,
            gate=answer,
            pause=(PAUSE_AFTER, rest),
        ),
    )
    await sign_in(page, service, await create_key(service, tenant, "member"), "/tasks")

    form = page.get_by_role("form", name="Run a task")
    await form.get_by_label("Agent").select_option("calc-bot")
    await form.get_by_label("Input").fill("What is 17 * 23 + 4?")
    await expect(form.get_by_label("Stream output")).to_be_checked()
    await form.get_by_role("button", name="Run task").click()
    await expect(page).to_have_url(TASK_URL, timeout=WAIT_MS)
    task_id = TASK_URL.match(page.url).group(1)  # type: ignore[union-attr]

    # The model asked for the calculator, which answered; the answer is held back.
    await service.fake_llm.wait_for_requests(2, MODEL)
    await expect(page.get_by_role("status").filter(has_text="Following live…")).to_be_visible()
    call = page.locator('li.step[data-step-type="tool_call"][data-tool="calculator"]')
    await expect(call).to_contain_text("17 * 23 + 4", timeout=WAIT_MS)
    result = call.locator('[data-step-type="tool_result"]')
    await expect(result).to_contain_text("success")
    await expect(result).to_contain_text("395")
    answer_card = page.locator("[data-answer]")
    await expect(answer_card).to_have_text("Waiting for the answer…")

    # The answer streams: the page shows the part sent so far, and nothing more.
    answer.set()
    partial = streamed_up_to(ANSWER, PAUSE_AFTER)
    draft = page.locator('[data-answer="draft"] .answer-text')
    await expect(draft).to_have_text(partial, timeout=WAIT_MS)
    live_reply = page.locator('li.step.llm [data-live="reply"] .reply-text')
    await expect(live_reply).to_have_text(partial)
    assert ANSWER not in await page.locator("main").inner_text()

    rest.set()
    await expect(page.locator('[data-answer="final"] .answer-text')).to_have_text(
        ANSWER, timeout=WAIT_MS
    )
    await expect(page.get_by_text("Following live…")).to_have_count(0, timeout=WAIT_MS)

    await expect(page.locator(".page-head .status")).to_have_text("completed")
    chain = await api_json(service, tenant, f"/api/v1/tasks/{task_id}/chain")
    await expect(page.locator("[data-step-type]")).to_have_count(len(chain["steps"]))
    assert await shown_steps(page) == [(s["step_number"], s["type"]) for s in chain["steps"]]
    task = await api_json(service, tenant, f"/api/v1/tasks/{task_id}")
    assert task["status"] == "completed"
    assert task["agent"]["name"] == "calc-bot"
    assert task["answer"] == ANSWER
    assert errors == []


async def test_the_status_filter_narrows_the_list(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    service.fake_llm.script(MODEL, Reply.text("All good."), Reply.error(400, "bad request"))
    async with service.client(tenant) as client:
        done = await submit(client, input="Say all good.")
        await stream(client, done["task_id"])
        failed = await submit(client, input="This one fails.")
        await stream(client, failed["task_id"])
    await sign_in(page, service, await create_key(service, tenant, "member"), "/tasks")

    await expect(rows(page)).to_have_count(2, timeout=WAIT_MS)
    filters = page.get_by_role("search", name="Filter tasks")
    await filters.get_by_label("Status").select_option("failed")
    await expect(rows(page)).to_have_count(1, timeout=WAIT_MS)
    await expect(rows(page).first).to_contain_text("This one fails.")
    await expect(rows(page).first.locator(".status")).to_have_text("failed")
    await expect(page).to_have_url(re.compile(r"/console/tasks\?status=failed$"))

    await filters.get_by_label("Status").select_option("completed")
    await expect(rows(page)).to_have_count(1, timeout=WAIT_MS)
    await expect(rows(page).first).to_contain_text("Say all good.")
    await filters.get_by_label("Status").select_option("cancelled")
    await expect(page.get_by_text("No task matches these filters.")).to_be_visible()
    await filters.get_by_label("Status").select_option("")
    await expect(rows(page)).to_have_count(2, timeout=WAIT_MS)


async def test_a_running_task_is_cancelled_from_the_list_and_from_its_page(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    held = asyncio.Event()  # never set: both runs wait for the model until cancelled
    service.fake_llm.script(MODEL, Reply.text("never", gate=held), Reply.text("never", gate=held))
    key = await create_key(service, tenant, "member")
    async with key_client(service, key) as client:  # the member's own tasks
        first = await submit(client, input="First long job")
        second = await submit(client, input="Second long job")
    await service.fake_llm.wait_for_requests(2, MODEL)
    await sign_in(page, service, key, "/tasks")

    row = page.locator(f'tr[data-task-id="{first["task_id"]}"]')
    await expect(row.locator(".status")).to_have_text("working", timeout=WAIT_MS)
    await row.get_by_role("button", name=f"Cancel task {first['task_id'][:8]}").click()
    await expect(row.locator(".status")).to_have_text("cancelled", timeout=WAIT_MS)
    await expect(row.get_by_role("button")).to_have_count(0)

    await page.get_by_role("link", name=second["task_id"][:8]).click()
    await expect(page.get_by_role("status").filter(has_text="Following live…")).to_be_visible(
        timeout=WAIT_MS
    )
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.locator(".page-head .status")).to_have_text("cancelled", timeout=WAIT_MS)
    await expect(page.get_by_text("Following live…")).to_have_count(0, timeout=WAIT_MS)
    await expect(page.get_by_role("button", name="Cancel task")).to_have_count(0)

    for accepted in (first, second):
        task = await api_json(service, tenant, f"/api/v1/tasks/{accepted['task_id']}")
        assert task["status"] == "cancelled"
