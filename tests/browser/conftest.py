"""Browser tests: the system Chromium driven by Playwright, offline. Every page of a test runs
in a context that lets requests reach 127.0.0.1 only and records any other it refused; each
test's page is photographed into test-artifacts/screenshots/ (kept by CI).

`scripts/test` installs Chromium where it can, or stops saying why; a test here never skips.

The console runs on Postgres alone: everything it shows comes through the API, whose tests
run on both Postgres and SQLite, and a page driven in Chromium costs seconds of CPU."""

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit
from uuid import uuid4

import pytest
from aiohttp import web
from playwright.async_api import Browser, Page, Playwright, Route, async_playwright

from tests.conftest import fresh_database
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
PAGES = Path(__file__).resolve().parent / "pages"
LOCAL_HOST = "127.0.0.1"


@pytest.fixture(scope="session", params=["postgres"])
async def database_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The browser tests' database: Postgres alone (see above)."""
    async with fresh_database("postgres", tmp_path_factory.mktemp("browser-db")) as url:
        yield url


@pytest.fixture(scope="session")
async def playwright() -> AsyncIterator[Playwright]:
    async with async_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
async def browser(playwright: Playwright) -> AsyncIterator[Browser]:
    """Headless Chromium from the system (never one Playwright downloads)."""
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (once per session)
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need the system Chromium "
            "(`apt-get install -y chromium`; scripts/test installs it when it runs as root)",
            pytrace=False,
        )
    browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield browser
    await browser.close()


@dataclass
class OfflinePage:
    """A browser page that reaches 127.0.0.1 only; `outside` lists what it tried elsewhere."""

    page: Page
    outside: list[str] = field(default_factory=list)


def _screenshot_name(node_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", node_name).strip("-") + ".png"


@pytest.fixture
async def offline_page(
    browser: Browser, request: pytest.FixtureRequest
) -> AsyncIterator[OfflinePage]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    offline = OfflinePage(await context.new_page())

    async def only_local(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).hostname == LOCAL_HOST:
            await route.continue_()
        else:
            offline.outside.append(url)
            await route.abort("blockedbyclient")

    await context.route("**/*", only_local)
    try:
        yield offline
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        # The viewport: a whole API reference is tens of thousands of pixels tall.
        await offline.page.screenshot(path=SCREENSHOTS / _screenshot_name(request.node.name))
        await context.close()
    assert offline.outside == [], f"the page tried to leave {LOCAL_HOST}: {offline.outside}"


@dataclass(frozen=True)
class PageServer:
    """Serves tests/browser/pages/ from another port than the service: another origin."""

    origin: str

    def url(self, name: str) -> str:
        return f"{self.origin}/{name}"


@pytest.fixture(scope="module")
async def page_server() -> AsyncIterator[PageServer]:
    app = web.Application()
    app.router.add_static("/", PAGES)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOCAL_HOST, 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield PageServer(f"http://{LOCAL_HOST}:{port}")
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
async def browser_service(
    database_url: str,
    shared_fake_llm: FakeLLMServer,
    page_server: PageServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Service]:
    """The service, its API open to the page server's origin."""
    settings = service_settings(
        tmp_path_factory.mktemp("browser"),
        database_url,
        shared_fake_llm,
        cors_origins=[page_server.origin],
    )
    async with running_service(settings, shared_fake_llm) as service:
        yield service


@pytest.fixture
async def service(browser_service: Service) -> AsyncIterator[Service]:
    """As the suite's `service`: no run left going, every scripted reply used."""
    yield browser_service
    leftover = browser_service.state.runs.active_runs
    await browser_service.state.runs.shutdown(grace_s=5)
    fake = browser_service.fake_llm
    try:
        assert leftover == 0, f"the test left {leftover} run(s) going"
        fake.verify()
    finally:
        fake.reset()


@pytest.fixture
async def tenant(browser_service: Service) -> str:
    return await browser_service.create_tenant(f"t-{uuid4().hex[:12]}")
