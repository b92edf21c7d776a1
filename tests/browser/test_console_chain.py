"""The chain view of the task page: a finished chain shows every step with the usage the API
states; a tool's progress shows under its call while the task runs; a viewer sees exactly the
steps the tenant's visibility settings give a viewer — nothing of the hidden ones — while a
tenant admin sees them all."""

import asyncio
import math
from typing import Any

import httpx
from playwright.async_api import Locator, Page, expect

from tests.api.helpers import configure, script_two_tool_task, stream, submit
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service


def js_duration(ms: float) -> str:
    """A duration as the console writes it (format.js `duration`)."""
    if ms < 1000:
        return f"{math.floor(ms + 0.5)} ms"
    return f"{ms / 1000:.1f} s"


def stat(page: Page, label: str) -> Locator:
    usage = page.get_by_label("Metrics")
    return usage.locator(".stat").filter(has_text=label).locator(".stat-value")


async def shown_steps(page: Page) -> list[tuple[int, str]]:
    """The steps the page shows: (step number, type), in step order."""
    shown = await page.locator("[data-step-type]").evaluate_all(
        "(steps) => steps.map((step) => [Number(step.dataset.stepNumber), step.dataset.stepType])"
    )
    return sorted((number, kind) for number, kind in shown)


async def test_a_finished_chain_shows_every_step_with_the_usage_the_api_states(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    script_two_tool_task(service.fake_llm)
    async with service.client(tenant) as client:
        task_id = (await submit(client))["task_id"]
        await stream(client, task_id)
    chain = await api_json(service, tenant, f"/api/v1/tasks/{task_id}/chain")
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{task_id}")

    steps = page.locator("[data-step-type]")
    await expect(steps).to_have_count(len(chain["steps"]), timeout=WAIT_MS)
    assert await shown_steps(page) == [(s["step_number"], s["type"]) for s in chain["steps"]]
    results = [step for step in chain["steps"] if step["tool_result"]]
    assert sum(1 for r in results if r["tool_result"]["cost_usd"] is not None) == 3  # LLM calls
    for step in results:
        result = step["tool_result"]
        shown = page.locator(
            f'[data-step-type="tool_result"][data-step-number="{step["step_number"]}"]'
        )
        await expect(shown).to_contain_text("success")
        await expect(shown.locator('[data-usage="duration"]')).to_have_text(
            js_duration(result["duration_ms"])
        )
        if result["input_tokens"] is not None:
            await expect(shown.locator('[data-usage="tokens"]')).to_have_text(
                f"{result['input_tokens']:,} in · {result['output_tokens']:,} out tokens"
            )
        if result["cost_usd"] is not None:
            await expect(shown.locator('[data-usage="cost"]')).to_have_text(
                f"${result['cost_usd']}"
            )
        else:
            await expect(shown.locator('[data-usage="cost"]')).to_have_count(0)
    for step in chain["steps"]:
        if step["tool_call"] and step["tool_call"]["tool_name"] != "llm":
            call = page.locator(f'li[data-step-number="{step["step_number"]}"]')
            await expect(call.locator(".tool-name")).to_have_text(step["tool_call"]["tool_name"])
            for value in step["tool_call"]["arguments"].values():
                await expect(call.locator("pre.arguments")).to_contain_text(str(value))
    metrics = chain["metrics"]
    await expect(stat(page, "Steps")).to_have_text(str(metrics["total_steps"]))
    await expect(stat(page, "LLM calls")).to_have_text(str(metrics["llm_calls"]))
    await expect(stat(page, "Tokens in")).to_have_text(f"{metrics['input_tokens']:,}")
    await expect(stat(page, "Tokens out")).to_have_text(f"{metrics['output_tokens']:,}")
    await expect(stat(page, "Cost")).to_have_text(f"${float(metrics['total_cost_usd']):.6f}")
    await expect(page.locator('[data-answer="final"]')).to_have_text("17 * 23 + 4 = 395.")


async def test_a_tools_progress_shows_under_its_call_while_the_task_runs(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await configure(service, tenant, "tools", {"enabled_tools": ["countdown"]})
    answer = asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("countdown", {"n": 4}, id="c1")]),
        Reply.text("Counted down from 4.", gate=answer),
    )
    async with service.client(tenant, sub="root") as client:
        task_id = (await submit(client, input="Count down from 4."))["task_id"]
    await service.fake_llm.wait_for_requests(2, MODEL)
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{task_id}")

    call = page.locator('li.step[data-tool="countdown"]')
    progress = call.locator(".tool-progress")
    await expect(progress).to_contain_text("0 left", timeout=WAIT_MS)
    await expect(progress.get_by_role("progressbar", name="Tool progress")).to_have_attribute(
        "aria-valuenow", "100"
    )
    await expect(call.locator('[data-step-type="tool_result"]')).to_contain_text('"reports": 4')
    await expect(page.get_by_role("status").filter(has_text="Following live…")).to_be_visible()

    answer.set()
    await expect(page.locator('[data-answer="final"]')).to_have_text(
        "Counted down from 4.", timeout=WAIT_MS
    )
    await expect(page.get_by_text("Following live…")).to_have_count(0, timeout=WAIT_MS)


# Viewers: the calculator's steps are hidden, the model's shown as summaries; the current
# time's steps and the answer whole.
VISIBILITY = {"roles": {"viewer": {"tools": {"calculator": "hidden", "llm": "summary"}}}}
EXPRESSION = "6 * 7"


def _script_hidden_calculator_task(service: Service) -> None:
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": EXPRESSION}, id="c1")]),
        Reply.tool_calls([ToolCall("current_time", {"timezone": "Asia/Tokyo"}, id="c2")]),
        Reply.text("The answer is 42, and it is late in Tokyo."),
    )


async def _chain_as(service: Service, key: str, task_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as client:
        response = await client.get(f"/api/v1/tasks/{task_id}/chain")
    assert response.status_code == 200, response.text
    chain: dict[str, Any] = response.json()
    return chain


async def test_a_viewer_sees_exactly_the_steps_the_api_gives_a_viewer_and_an_admin_sees_all(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await configure(service, tenant, "visibility", VISIBILITY)
    _script_hidden_calculator_task(service)
    async with service.client(tenant) as client:
        task_id = (await submit(client, input="What is six times seven, and the time?"))["task_id"]
        await stream(client, task_id)
    viewer, admin = (
        await create_key(service, tenant, "viewer", name="viewer"),
        await create_key(service, tenant, "tenant_admin", name="admin"),
    )
    seen = await _chain_as(service, viewer, task_id)
    everything = await _chain_as(service, admin, task_id)
    summaries = [s for s in seen["steps"] if s["visibility"]["level"] == "summary"]
    assert len(seen["steps"]) < len(everything["steps"])
    assert summaries  # the model's steps, as summaries

    await sign_in(page, service, admin, f"/tasks/{task_id}")
    await expect(page.locator("[data-step-type]")).to_have_count(
        len(everything["steps"]), timeout=WAIT_MS
    )
    assert await shown_steps(page) == [(s["step_number"], s["type"]) for s in everything["steps"]]
    await expect(page.locator('li[data-tool="calculator"] pre.arguments')).to_contain_text(
        EXPRESSION
    )
    await page.get_by_role("button", name="Sign out").click()

    await sign_in(page, service, viewer, f"/tasks/{task_id}")
    await expect(page.locator("[data-step-type]")).to_have_count(
        len(seen["steps"]), timeout=WAIT_MS
    )
    assert await shown_steps(page) == [(s["step_number"], s["type"]) for s in seen["steps"]]
    shown_summaries = page.locator(".step-summary")
    await expect(shown_summaries).to_have_count(len(summaries))
    for step in summaries:
        summary = page.locator(f'.step-summary[data-step-number="{step["step_number"]}"]')
        await expect(summary).to_contain_text("summary")
        await expect(summary).to_contain_text(step["visibility"]["summary"])
    await expect(page.locator('li[data-tool="current_time"]')).to_contain_text("Asia/Tokyo")
    text = await page.evaluate("() => document.body.textContent")
    assert "calculator" not in text
    assert EXPRESSION not in text
    await expect(page.locator('[data-answer="final"]')).to_have_text(
        "The answer is 42, and it is late in Tokyo."
    )
