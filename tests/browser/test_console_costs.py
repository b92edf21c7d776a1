"""The console's costs: the chart is drawn from exactly the costs API's figures (per day by
model, by agent and by strategy), the top tasks are the API's costliest, the CSV download is
the API's CSV, today's spend is shown against the tenant's limits; a member sees no costs."""

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import anyio
from playwright.async_api import Page, Request, expect

from tests.api.helpers import configure, define_agent, script_two_tool_task, stream, submit
from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

CHART = """(label) => {
  const canvas = document.querySelector(`canvas[aria-label="${label}"]`);
  const chart = canvas && canvas.chart;
  if (!chart) return null;
  return {
    labels: chart.data.labels,
    datasets: chart.data.datasets.map((d) => ({
      label: d.label,
      split: d.split,
      points: d.data.map((p) => ({ x: p.x, y: p.y, cost_usd: p.cost_usd })),
    })),
  };
}"""


async def _run_tasks(service: Service, tenant: str) -> None:
    """Three finished tasks with priced calls: agent `alpha` (three calls), agent `beta` (one
    costlier call, `direct`) and the built-in agent (one cheap call); all but beta's ReAct."""
    await define_agent(service, tenant, "alpha", tools=["calculator", "current_time"])
    await define_agent(service, tenant, "beta", instructions="Answer in one word.", kind="direct")
    script_two_tool_task(service.fake_llm)
    service.fake_llm.script(MODEL, Reply.text("Yes.", prompt_tokens=1200, completion_tokens=450))
    service.fake_llm.script(MODEL, Reply.text("Fine.", prompt_tokens=40, completion_tokens=9))
    async with service.client(tenant) as client:
        for agent in ("alpha", "beta", None):
            accepted = await submit(client, **({"agent": agent} if agent else {}))
            events = await stream(client, accepted["task_id"])
            assert events[-1].event == "done"


def _cost_queries(page: Page) -> list[dict[str, str]]:
    """The costs API queries the page makes, as they are made."""
    seen: list[dict[str, str]] = []

    def record(request: Request) -> None:
        url = urlsplit(request.url)
        if url.path.endswith("/costs"):
            seen.append(dict(parse_qsl(url.query)))

    page.on("request", record)
    return seen


def _one(queries: list[dict[str, str]], **wanted: str) -> dict[str, str]:
    matching = [q for q in queries if all(q.get(k) == v for k, v in wanted.items())]
    assert matching, (wanted, queries)
    return matching[-1]


def _assert_drawn_from(chart: dict[str, Any], report: dict[str, Any], none: str) -> None:
    """Every group of the report is the point of its day in its series, with the same exact
    figure; every other point is a day without spend."""
    assert report["groups"]
    by_split = {d["split"]: d for d in chart["datasets"]}
    assert set(by_split) == {g["split"] for g in report["groups"]}
    drawn = {
        (d["split"], p["x"]): p for d in chart["datasets"] for p in d["points"] if p["cost_usd"]
    }
    assert set(drawn) == {(g["split"], g["key"]) for g in report["groups"]}
    for group in report["groups"]:
        point = drawn[(group["split"], group["key"])]
        assert point["cost_usd"] == group["cost_usd"]
        assert point["y"] == float(group["cost_usd"])
    for dataset in chart["datasets"]:
        assert dataset["label"] == (dataset["split"] or none)
        for point in dataset["points"]:
            if point["cost_usd"] is None:
                assert point["y"] == 0


def _console_errors(page: Page) -> list[str]:
    """What the page logs as errors (none expected)."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


async def test_the_cost_chart_top_tasks_and_csv_are_the_costs_apis_figures(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    await _run_tasks(service, tenant)
    await configure(
        service, tenant, "quotas", {"cost_per_day_usd": "0.05", "cost_per_hour_usd": "0.004"}
    )
    page = offline_page.page
    errors = _console_errors(page)
    queries = _cost_queries(page)
    await sign_in(page, service, await create_key(service, tenant, "tenant_admin"), "/costs")

    costs = f"/api/v1/tenants/{tenant}/costs"
    by_model_label = "Spend per day by model"
    await page.wait_for_function(CHART, arg=by_model_label, timeout=WAIT_MS)
    query = _one(queries, group_by="day", split_by="model")
    chart = await page.evaluate(CHART, by_model_label)
    by_model = await api_json(service, tenant, costs, **query)
    _assert_drawn_from(chart, by_model, "no model")
    # The last 30 UTC days, today the last, days without spend included.
    today = datetime.now(UTC).date()
    assert chart["labels"] == [str(today - timedelta(days=n)) for n in range(29, -1, -1)]
    assert query["from"].startswith(chart["labels"][0])

    totals = by_model["totals"]
    stats = page.locator(".costs-totals")
    await expect(stats.locator("[data-usd]")).to_have_attribute("data-usd", totals["cost_usd"])
    await expect(stats).to_contain_text(f"{totals['calls']}")

    # The costliest tasks, in the API's order, each linking to its task.
    top = await api_json(
        service, tenant, costs, **_one(queries, group_by="task", order="cost", limit="10")
    )
    assert len(top["groups"]) == 3
    table = page.get_by_role("table", name="Top tasks by cost")
    links = table.get_by_role("link")
    await expect(links).to_have_count(3)
    hrefs = [await links.nth(i).get_attribute("href") for i in range(3)]
    assert hrefs == [f"/console/tasks/{g['key']}" for g in top["groups"]]
    cells = table.locator("[data-usd]")
    assert [await cells.nth(i).get_attribute("data-usd") for i in range(3)] == [
        g["cost_usd"] for g in top["groups"]
    ]

    # The download is the API's CSV of the same figures.
    async with page.expect_download() as info:
        await page.get_by_role("button", name="Download CSV").click()
    download = await info.value
    saved = await anyio.Path(await download.path()).read_bytes()
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        csv = await admin.get(costs, params=query, headers={"Accept": "text/csv"})
    assert csv.status_code == 200
    assert saved == csv.content
    assert download.suggested_filename == f"costs-{tenant}.csv"

    # Per day by agent: alpha, beta and the built-in agent.
    await page.get_by_role("tab", name="By agent").click()
    by_agent_label = "Spend per day by agent"
    await page.wait_for_function(CHART, arg=by_agent_label, timeout=WAIT_MS)
    by_agent = await api_json(
        service, tenant, costs, **_one(queries, group_by="day", split_by="agent")
    )
    assert {g["split"] for g in by_agent["groups"]} == {"alpha", "beta", "default"}
    _assert_drawn_from(await page.evaluate(CHART, by_agent_label), by_agent, "no agent")

    # Today's spend against the daily limit.
    daily = page.get_by_role("meter", name="Today (UTC): spend against the limit per day")
    percent = float(totals["cost_usd"]) / 0.05 * 100
    await expect(daily).to_have_attribute("aria-valuetext", f"{percent:.1f}% of $0.05")

    await page.get_by_text("Show figures").click()
    figures = page.get_by_role("table", name="Spend per day by agent: figures")
    await expect(figures.get_by_role("row")).to_have_count(2)  # the header and today
    await expect(figures.get_by_role("row").nth(1)).to_contain_text(str(today))

    # Per day by strategy, and the spend of each strategy in the API's order.
    await page.get_by_role("tab", name="By strategy").click()
    by_strategy_label = "Spend per day by strategy"
    await page.wait_for_function(CHART, arg=by_strategy_label, timeout=WAIT_MS)
    per_day = await api_json(
        service, tenant, costs, **_one(queries, group_by="day", split_by="strategy")
    )
    assert {g["split"] for g in per_day["groups"]} == {"react", "direct"}
    _assert_drawn_from(await page.evaluate(CHART, by_strategy_label), per_day, "no strategy")
    spent = await api_json(service, tenant, costs, **_one(queries, group_by="strategy"))
    strategies = page.get_by_role("table", name="Spend by strategy")
    rows = strategies.locator("tbody tr")
    await expect(rows).to_have_count(2)
    assert [await rows.nth(i).locator("td").first.inner_text() for i in range(2)] == [
        g["key"] for g in spent["groups"]
    ]
    assert errors == []


async def test_a_member_sees_no_costs(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = _console_errors(page)
    await sign_in(page, service, await create_key(service, tenant, "member"))
    navigation = page.get_by_role("navigation", name="Console")
    await expect(navigation.get_by_role("link", name="Agents")).to_be_visible()
    await expect(navigation.get_by_role("link", name="Costs")).to_have_count(0)

    await page.goto(console_url(service, "/costs"))
    await expect(page.get_by_text("Costs are visible to roles with the")).to_be_visible(
        timeout=WAIT_MS
    )
    await expect(page.get_by_role("button", name="Download CSV")).to_have_count(0)
    assert errors == []
