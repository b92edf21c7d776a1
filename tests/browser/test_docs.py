"""The API reference renders in a browser that may reach nothing but the service: its assets
come from the service itself (asserted on the rendered page, not on the HTML), under the
pages' Content-Security-Policy without a single violation."""

from playwright.async_api import Page

from app.observability.tracing import service_version
from tests.browser.conftest import OfflinePage
from tests.service import Service

WAIT_MS = 20_000


def _errors_of(page: Page) -> list[str]:
    """The page's console errors (a refused script, style or fetch is one) and uncaught errors."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


async def test_swagger_ui_renders_offline(service: Service, offline_page: OfflinePage) -> None:
    page = offline_page.page
    errors = _errors_of(page)
    response = await page.goto(f"{service.base_url}/docs")
    submit = page.locator(".opblock-summary", has_text="Submit a task")
    await submit.first.wait_for(timeout=WAIT_MS)

    title = await page.locator(".info .title").first.inner_text()
    assert title.split() == ["OmniForge", service_version(), "OAS", "3.1"]
    assert await submit.count() == 1
    assert await page.locator(".opblock").count() > 50
    assert offline_page.outside == []
    assert response is not None
    assert "frame-ancestors 'none'" in (await response.all_headers())["content-security-policy"]
    assert errors == []


async def test_redoc_renders_offline(service: Service, offline_page: OfflinePage) -> None:
    page = offline_page.page
    errors = _errors_of(page)
    response = await page.goto(f"{service.base_url}/redoc")
    heading = page.get_by_role("heading", name="Submit a task")
    await heading.first.wait_for(timeout=WAIT_MS)

    assert await page.get_by_role("heading", name="OmniForge").first.is_visible()
    assert await heading.count() >= 1
    assert offline_page.outside == []
    assert response is not None
    assert "frame-ancestors 'none'" in (await response.all_headers())["content-security-policy"]
    assert errors == []
