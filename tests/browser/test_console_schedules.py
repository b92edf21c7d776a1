"""The console's schedules: a member makes a schedule in the form, sees when it fires next,
opens the tasks its firing made (linked to their pages), pauses, resumes and deletes it."""

import re
from datetime import datetime

from playwright.async_api import Page, expect

from app.resources.schedules import Scheduler, ScheduleStore
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.service import Service


def _console_errors(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


async def test_a_member_makes_a_schedule_sees_its_tasks_and_pauses_resumes_and_deletes_it(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = _console_errors(page)
    await sign_in(page, service, await create_key(service, tenant, "member"), "/schedules")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Schedules")
    await expect(page.get_by_text("No schedule yet.")).to_be_visible(timeout=WAIT_MS)

    form = page.get_by_role("form", name="New schedule")
    await form.get_by_label("Name").fill("Morning report")
    # Daily at 06:00: earlier than the yearly schedules other tests leave on this database
    # (which the scheduler below would fire with it), and not fired by the service's own
    # scheduler while the test runs (unless it runs at 06:00).
    await form.get_by_label("Cron").fill("0 6 * * *")
    await form.get_by_label("Time zone").fill("Europe/Berlin")
    await form.get_by_label("Model").fill("demo")
    await form.get_by_label("Input").fill("What is 17 * 23 + 4?")
    await form.get_by_role("button", name="Create schedule").click()

    table = page.get_by_role("table", name="Schedules")
    row = table.get_by_role("row").filter(has_text="Morning report")
    await expect(row).to_be_visible(timeout=WAIT_MS)
    [schedule] = (await api_json(service, tenant, "/api/v1/schedules"))["items"]
    await expect(row).to_contain_text("0 6 * * *")
    await expect(row).to_contain_text("Europe/Berlin")
    await expect(row.locator(".next-firing time")).to_have_attribute(
        "datetime", schedule["next_fire_at"]
    )

    # Its first firing, made now by a scheduler whose clock is at that moment.
    first = datetime.fromisoformat(schedule["next_fire_at"])
    scheduler = Scheduler(
        ScheduleStore(service.state.database),
        service.state.schedule_firings.fire,
        clock=lambda: first,
    )
    assert await scheduler.tick() >= 1
    [task] = (await api_json(service, tenant, f"/api/v1/schedules/{schedule['id']}/tasks"))["items"]
    await page.reload()
    await expect(row.locator("td.number").first).to_have_text("1", timeout=WAIT_MS)
    await row.get_by_role("button", name="Tasks").click()
    made = page.get_by_role("list", name="Tasks of Morning report")
    link = made.get_by_role("link", name=task["id"][:8])
    await expect(link).to_be_visible(timeout=WAIT_MS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / "console-schedules-with-tasks.png", full_page=True)
    await link.click()
    await expect(page).to_have_url(console_url(service, f"/tasks/{task['id']}"), timeout=WAIT_MS)
    await expect(page.get_by_text("completed").first).to_be_visible(timeout=WAIT_MS)

    await page.goto(console_url(service, "/schedules"))
    await row.get_by_role("button", name="Pause").click()
    await expect(row.get_by_text("paused")).to_be_visible(timeout=WAIT_MS)
    await expect(row.locator(".next-firing")).to_have_text("—")
    await row.get_by_role("button", name="Resume").click()
    await expect(row.get_by_text("active")).to_be_visible(timeout=WAIT_MS)
    await expect(row.locator(".next-firing time")).to_be_visible()

    await row.get_by_role("button", name="Delete").click()
    await (
        row.get_by_role("group", name=re.compile("Confirm deleting"))
        .get_by_role("button", name="Delete for good")
        .click()
    )
    await expect(row).to_have_count(0, timeout=WAIT_MS)
    assert (await api_json(service, tenant, "/api/v1/schedules"))["items"] == []
    assert errors == []
