"""The web console's first load in headless Chromium: bytes transferred and the time from
navigation to the first chain step drawn on a task's page.

Each run opens a fresh browser context (empty cache) on a task page of a task submitted just
before, signed in (the credential in the tab's session storage, as after signing in), and times
from navigation start (`performance.timeOrigin`) to the moment a MutationObserver sees the first
step in the page. Bytes are what the network carried for the page (Chrome DevTools Protocol
`encodedDataLength`: headers and bodies as sent) until then; the open event stream counts what
it carried by that moment. A second navigation in the same context gives the warm figure
(scripts and styles from the cache)."""

import statistics
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import BrowserContext, async_playwright

from bench.service_harness import Stack, client, run_async, stack
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

DELAY_S = 0.0
# Records when the first chain step appears (ms since navigation start) in window.firstStepAt.
FIRST_STEP_WATCH = """
(() => {
  const seen = () => document.querySelector('[data-step-type]');
  const watch = new MutationObserver(() => {
    if (seen()) { window.firstStepAt = performance.now(); watch.disconnect(); }
  });
  watch.observe(document, { childList: true, subtree: true });
})();
"""


@dataclass
class Load:
    first_step_ms: float
    bytes: int
    requests: int


@dataclass
class ConsoleLoad:
    runs: int
    cold: list[Load] = field(default_factory=list)
    warm: list[Load] = field(default_factory=list)
    asset_bytes: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def median(loads: list[Load], attribute: str) -> float:
        values: list[float] = [getattr(load, attribute) for load in loads]
        return statistics.median(values)


async def _task(stack: Stack) -> str:
    async with (
        client() as session,
        session.post(
            f"{stack.base_url}/api/v1/tasks",
            json={"input": "Say ok.", "model": stack.model_for(DELAY_S)},
            headers=stack.headers(),
        ) as response,
    ):
        accepted: dict[str, Any] = await response.json()
        return str(accepted["task_id"])


async def _load(context: BrowserContext, url: str, sizes: dict[str, int] | None) -> Load:
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    carried: dict[str, int] = {}
    urls: dict[str, str] = {}

    def received(event: dict[str, Any]) -> None:
        urls[event["requestId"]] = event["response"]["url"]

    def progress(event: dict[str, Any]) -> None:  # streamed bodies (the event stream)
        request = event["requestId"]
        carried[request] = carried.get(request, 0) + event["encodedDataLength"]

    def finished(event: dict[str, Any]) -> None:
        carried[event["requestId"]] = event["encodedDataLength"]

    cdp.on("Network.responseReceived", received)
    cdp.on("Network.dataReceived", progress)
    cdp.on("Network.loadingFinished", finished)
    await cdp.send("Network.enable")
    await page.goto(url, wait_until="commit")
    await page.wait_for_function("() => window.firstStepAt !== undefined", timeout=30_000)
    first_step: float = await page.evaluate("() => window.firstStepAt")
    if sizes is not None:
        for request_id, size in carried.items():
            name = urls.get(request_id, request_id).split("?")[0].rsplit("/", 1)[-1]
            sizes["page (HTML)" if len(name) == 36 else name] = size
    await page.close()
    return Load(first_step, sum(carried.values()), len(carried))


async def measure(stack: Stack, runs: int) -> ConsoleLoad:
    token = stack.headers()["Authorization"].removeprefix("Bearer ")
    result = ConsoleLoad(runs)
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for run in range(runs + 1):  # the first is a warm-up of the service
                context = await browser.new_context(viewport={"width": 1280, "height": 900})
                await context.add_init_script(
                    f"sessionStorage.setItem('omniforge.credential', {token!r});"
                )
                await context.add_init_script(FIRST_STEP_WATCH)
                cold_url = f"{stack.base_url}/console/tasks/{await _task(stack)}"
                cold = await _load(context, cold_url, result.asset_bytes if run == 1 else None)
                warm_url = f"{stack.base_url}/console/tasks/{await _task(stack)}"
                warm = await _load(context, warm_url, None)
                await context.close()
                if run:
                    result.cold.append(cold)
                    result.warm.append(warm)
        finally:
            await browser.close()
    return result


def run(runs: int = 20) -> ConsoleLoad:
    async def main() -> ConsoleLoad:
        async with stack([DELAY_S]) as service:
            return await measure(service, runs)

    return run_async(main())
