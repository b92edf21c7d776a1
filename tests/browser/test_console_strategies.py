"""A strategy's records on the task page: a tree search is drawn as its tree, each node under
its parent with its score and the path the answer follows marked; a plan as its waves of
steps, coloured by state as it runs; the timeline names each record; `auto`'s choice and
fallback are stated above the chain."""

import asyncio
import json

from playwright.async_api import expect

from tests.api.helpers import stream, submit
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.fakes.openai_server import Reply
from tests.service import MODEL, Service

PROPOSE, RATE = "propose 2 different", "rate how likely"


def _score(value: float) -> Reply:
    return Reply.text(json.dumps({"score": value, "reason": f"looks {value}"}))


def _thoughts(*thoughts: str) -> Reply:
    return Reply.text(json.dumps({"thoughts": list(thoughts)}))


async def test_a_tree_search_is_drawn_as_its_tree_with_the_chosen_path(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    fake = service.fake_llm
    fake.script_matching(MODEL, (PROPOSE, "(none yet)"), _thoughts("Add 3 and 4", "Guess"))
    fake.script_matching(MODEL, (RATE, "1. Add 3 and 4"), _score(0.8))
    fake.script_matching(MODEL, (RATE, "1. Guess"), _score(0.2))
    fake.script_matching(
        MODEL, (PROPOSE, "1. Add 3 and 4"), _thoughts("Times 12 is 84", "Times 12 is 80")
    )
    fake.script_matching(MODEL, (RATE, "2. Times 12 is 84"), _score(0.95))
    fake.script_matching(MODEL, (RATE, "2. Times 12 is 80"), _score(0.1))
    fake.script_matching(MODEL, ("final answer to the task",), Reply.text("84"))
    options = {"tot": {"breadth": 2, "depth": 2, "beam": 1}}
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        created = await admin.post(
            "/api/v1/agents", json={"name": "searcher", "kind": "tot", "strategy": options}
        )
        assert created.status_code == 201, created.text
        task_id = (await submit(admin, input="What is 12*(3+4)?", agent="searcher"))["task_id"]
        await stream(admin, task_id)
    chain = await api_json(service, tenant, f"/api/v1/tasks/{task_id}/chain")
    number = {
        step["thinking"]["thought"]: step["step_number"]
        for step in chain["steps"]
        if step["thinking"] and step["thinking"].get("event") == "thought"
    }
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{task_id}")

    tree = page.get_by_label("Search tree")
    await expect(tree.locator("[data-tree-node]")).to_have_count(4, timeout=WAIT_MS)
    first = tree.locator(f'[data-tree-node="{number["Add 3 and 4"]}"]')
    # The second level hangs under the node it extends.
    for child in ("Times 12 is 84", "Times 12 is 80"):
        await expect(first.locator(f'[data-tree-node="{number[child]}"]')).to_have_count(1)
    await expect(tree.locator('[data-chosen="true"] > .tree-label .tree-thought')).to_have_text(
        ["Add 3 and 4", "Times 12 is 84"]
    )
    best = tree.locator(f'[data-tree-node="{number["Times 12 is 84"]}"] > .tree-label')
    await expect(best.locator("[data-score]")).to_have_text("0.95")
    guess = tree.locator(f'[data-tree-node="{number["Guess"]}"]')
    await expect(guess).to_have_attribute("data-chosen", "false")
    await expect(guess.locator("[data-score]")).to_have_text("0.20")
    # The timeline names each record by what it is.
    labels = {"thought": "Thought", "thought_scored": "Score", "path_chosen": "Chosen path"}
    for event, count in {"thought": 4, "thought_scored": 4, "path_chosen": 1}.items():
        records = page.locator(f'.timeline [data-event="{event}"] .step-label')
        await expect(records).to_have_text([labels[event]] * count)
    await expect(page.get_by_text("84", exact=True).first).to_be_visible()
    await tree.scroll_into_view_if_needed()


async def test_autos_choice_and_fallback_are_stated_above_the_chain(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    fake = service.fake_llm
    fake.script_matching(MODEL, ("step by step",), Reply.text("Hm.\nAnswer: forty-two"))
    fake.script_matching(MODEL, ("directly",), Reply.text('{"total": 42}'))
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    definition = {
        "name": "chooser",
        "kind": "auto",
        "response_format": schema,
        "strategy": {"auto": {"assess": "heuristic"}},
    }
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        created = await admin.post("/api/v1/agents", json=definition)
        assert created.status_code == 201, created.text
        question = "Explain why, step by step: what is the total of 12 and 30?"
        task_id = (await submit(admin, input=question, agent="chooser"))["task_id"]
        await stream(admin, task_id)
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{task_id}")

    notes = page.locator("[data-strategy-event]")
    await expect(notes).to_have_count(2, timeout=WAIT_MS)
    await expect(notes.nth(0)).to_contain_text("Strategy cot")
    await expect(notes.nth(1)).to_have_attribute("data-strategy-event", "strategy_fallback")
    await expect(notes.nth(1)).to_contain_text("falling back to direct")
    await expect(page.get_by_label("Search tree")).to_have_count(0)


async def test_a_live_plan_is_drawn_as_waves_of_steps_coloured_by_state(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    """While a plan runs the page draws its waves: of the first wave, the step whose call
    has its result `returned` (a wave's steps are judged together once all are back), the
    one whose call is held `running`; the step waiting for both `waiting`; once the held
    call is answered, every step is `done`."""
    page = offline_page.page
    fake = service.fake_llm
    held = asyncio.Event()
    plan = {
        "steps": [
            {"id": "sizes", "description": "List the sizes", "strategy": "direct"},
            {"id": "prices", "description": "List the prices", "strategy": "direct"},
            {
                "id": "table",
                "description": "Join sizes and prices",
                "strategy": "direct",
                "depends_on": ["sizes", "prices"],
            },
        ]
    }
    fake.script_matching(MODEL, ("Plan how to do the task",), Reply.text(json.dumps(plan)))
    fake.script_matching(MODEL, ("This step: List the sizes",), Reply.text("S, M, L"))
    fake.script_matching(MODEL, ("This step: List the prices",), Reply.text("5, 6, 7", gate=held))
    fake.script_matching(MODEL, ("This step: Join sizes",), Reply.text("S 5, M 6, L 7"))
    fake.script_matching(MODEL, ("results of the plan's steps",), Reply.text("S 5, M 6, L 7"))
    async with service.client(tenant, sub="root") as client:
        task_id = (await submit(client, input="Price list?", kind="plan"))["task_id"]
    await fake.wait_for_requests(3, MODEL)
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{task_id}")

    graph = page.get_by_label("Plan", exact=True)
    step = graph.locator("[data-plan-step]")
    await expect(step).to_have_count(3, timeout=WAIT_MS)
    await expect(graph.locator('[data-plan-level="0"] [data-plan-step]')).to_have_count(2)
    await expect(graph.locator('[data-plan-level="1"] [data-plan-step="table"]')).to_have_count(1)
    await expect(graph.locator('[data-plan-step="sizes"]')).to_have_attribute(
        "data-state", "returned"
    )
    await expect(graph.locator('[data-plan-step="prices"]')).to_have_attribute(
        "data-state", "running"
    )
    await expect(graph.locator('[data-plan-step="table"]')).to_have_attribute(
        "data-state", "waiting"
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / "plan-graph-live.png")
    held.set()
    for name in ("sizes", "prices", "table"):
        await expect(graph.locator(f'[data-plan-step="{name}"]')).to_have_attribute(
            "data-state", "done", timeout=WAIT_MS
        )
    await expect(page.locator('[data-answer="final"]')).to_have_text("S 5, M 6, L 7")
