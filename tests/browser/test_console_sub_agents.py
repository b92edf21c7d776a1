"""Sub-agents in the chain view: a sub-agent's chain shows nested under the call that started
it — read back once the family has finished (its own sub-agents nested in turn), followed from
the parent's stream while it runs — and a child's steps, status and answer never pass for the
parent's. A child that failed shows its failure."""

import asyncio
import re
from typing import Any

from playwright.async_api import Locator, Page, expect

from tests.api.helpers import define_agent, stream, submit
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service

# The page's own steps: those in no sub-agent's block.
OWN_STEPS = "[data-step-type]:not([data-child-chain] [data-step-type])"


def child_steps(chain_id: str) -> str:
    """The steps shown directly in the block of sub-agent chain `chain_id`: none of those of
    the sub-agents nested in it."""
    block = f'[data-child-chain="{chain_id}"]'
    return f"{block} [data-step-type]:not({block} [data-child-chain] [data-step-type])"


async def numbered(steps: Locator) -> list[tuple[int, str]]:
    """What `steps` show: (step number, type), in step order."""
    shown = await steps.evaluate_all(
        "(steps) => steps.map((step) => [Number(step.dataset.stepNumber), step.dataset.stepType])"
    )
    return sorted((number, kind) for number, kind in shown)


def of_chain(chain: dict[str, Any]) -> list[tuple[int, str]]:
    return [(step["step_number"], step["type"]) for step in chain["steps"]]


def sub_agent(scope: Page | Locator, name: str) -> Locator:
    return scope.get_by_role("group", name=f"Sub-agent {name}", exact=True)


async def open_block(block: Locator) -> None:
    head = block.locator(":scope > details > summary")
    await expect(block.locator(":scope > details")).not_to_have_attribute("open", "")
    await head.click()


async def photograph_chain(page: Page, name: str) -> None:
    """The task page's chain card, whole, into the screenshots."""
    card = page.locator("section.card").filter(has=page.get_by_role("heading", name="Chain"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await card.screenshot(path=SCREENSHOTS / name)


def result_of(chain: dict[str, Any], tool: str) -> dict[str, Any]:
    results: list[dict[str, Any]] = [
        step["tool_result"]
        for step in chain["steps"]
        if step["tool_result"] is not None and step["tool_result"]["tool_name"] == tool
    ]
    [result] = results
    return result


async def test_a_finished_parent_shows_its_childs_chain_nested_under_the_call_that_started_it(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await define_agent(service, tenant, "checker", description="Checks facts.", tools=[])
    await define_agent(
        service, tenant, "researcher", description="Finds facts.", tools=["agent:checker"]
    )
    await define_agent(service, tenant, "lead", tools=["agent:researcher"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls(
            [ToolCall("agent__researcher", {"task": "At what temperature does water boil?"})]
        ),
        Reply.tool_calls([ToolCall("agent__checker", {"task": "Is it 100 °C at sea level?"})]),
        Reply.text("Confirmed: 100 °C at sea level.", prompt_tokens=20, completion_tokens=9),
        Reply.text("Water boils at 100 °C at sea level.", prompt_tokens=30, completion_tokens=12),
        Reply.text("Done: water boils at 100 °C."),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, input="When does water boil?", agent="lead"))["task_id"]
        await stream(client, parent_id)
    chain = await api_json(service, tenant, f"/api/v1/tasks/{parent_id}/chain")
    called = result_of(chain, "agent__researcher")
    child = await api_json(service, tenant, f"/api/v1/tasks/{called['child_task_id']}")
    child_chain = await api_json(service, tenant, f"/api/v1/tasks/{child['id']}/chain")
    assert called["llm_calls"] == 3  # the researcher's two and the checker's one
    checked = result_of(child_chain, "agent__checker")
    grandchild_chain = await api_json(
        service, tenant, f"/api/v1/tasks/{checked['child_task_id']}/chain"
    )
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{parent_id}")

    own = page.locator(OWN_STEPS)
    await expect(own).to_have_count(len(chain["steps"]), timeout=WAIT_MS)
    assert await numbered(own) == of_chain(chain)
    call = page.locator('li.step[data-step-type="tool_call"][data-tool="agent__researcher"]')
    block = sub_agent(call, "researcher")
    await expect(block).to_have_attribute("data-child-chain", child["chain_id"])
    await expect(block).to_have_attribute("data-child-status", "completed")
    # Closed until opened, saying how the child ended and what its family used.
    await expect(block.locator('[data-child-usage="llm_calls"]')).to_have_text(
        f"{called['llm_calls']} LLM calls"  # the researcher's and the checker's
    )
    await expect(block.locator('[data-child-usage="tokens"]')).to_have_text(
        f"{called['input_tokens']:,} in · {called['output_tokens']:,} out tokens"
    )
    await expect(block.locator(child_steps(child["chain_id"]))).to_have_count(0)

    await open_block(block)
    nested = page.locator(child_steps(child["chain_id"]))
    await expect(nested).to_have_count(len(child_chain["steps"]), timeout=WAIT_MS)
    assert await numbered(nested) == of_chain(child_chain)
    # The child's block sits between the call and the call's result, inside the call's step.
    await expect(call.locator(':scope > [data-step-type="tool_result"]')).to_contain_text(
        child["answer"]
    )
    await expect(block.locator(':scope [data-child-answer="final"]').first).to_contain_text(
        "Water boils at 100 °C at sea level."
    )
    checker_call = block.locator('li[data-tool="agent__checker"] > .step-head .tool-name')
    await expect(checker_call).to_have_text("agent__checker")

    grandchild = sub_agent(block, "checker")
    await expect(grandchild).to_have_attribute("data-child-status", "completed")
    await open_block(grandchild)
    deeper = page.locator(child_steps(checked["child_chain_id"]))
    await expect(deeper).to_have_count(len(grandchild_chain["steps"]), timeout=WAIT_MS)
    assert await numbered(deeper) == of_chain(grandchild_chain)
    await expect(grandchild.locator('[data-child-answer="final"] .answer-text')).to_have_text(
        "Confirmed: 100 °C at sea level."
    )
    # Nothing of the children counts as the parent's.
    await expect(own).to_have_count(len(chain["steps"]))
    await expect(page.locator('[data-answer="final"]')).to_have_text("Done: water boils at 100 °C.")
    await photograph_chain(page, "sub-agents-finished-nested.png")

    # The child's own page: its chain as its own, its sub-agent nested under its call.
    await block.get_by_role("link", name="Open the task of sub-agent researcher").click()
    await expect(page).to_have_url(re.compile(f".*/tasks/{child['id']}$"), timeout=WAIT_MS)
    await expect(own).to_have_count(len(child_chain["steps"]), timeout=WAIT_MS)
    assert await numbered(own) == of_chain(child_chain)
    await expect(page.locator('[data-answer="final"]')).to_have_text(child["answer"])
    await expect(sub_agent(page, "checker")).to_have_attribute(
        "data-child-chain", checked["child_chain_id"]
    )


async def test_a_child_that_failed_shows_its_failure_under_the_call(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await define_agent(service, tenant, "researcher", tools=[])
    await define_agent(service, tenant, "lead", tools=["agent:researcher"])
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__researcher", {"task": "Find it."})]),
        Reply.error(400, "the request was refused"),
        Reply.text("The researcher could not find it."),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, input="Find it.", agent="lead"))["task_id"]
        await stream(client, parent_id)
    chain = await api_json(service, tenant, f"/api/v1/tasks/{parent_id}/chain")
    called = result_of(chain, "agent__researcher")
    child = await api_json(service, tenant, f"/api/v1/tasks/{called['child_task_id']}")
    assert called["success"] is False
    assert child["status"] == "failed"
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{parent_id}")

    block = sub_agent(page, "researcher")
    await expect(block).to_have_attribute("data-child-status", "failed", timeout=WAIT_MS)
    # Closed, the call's result says why: the child failed.
    failure = block.locator('[data-child-answer="error"]')
    await expect(failure.locator("code")).to_have_text(called["error_code"])
    await open_block(block)
    # Open, the child's chain says how: its model call was refused.
    nested = page.locator(child_steps(child["chain_id"]))
    child_chain = await api_json(service, tenant, f"/api/v1/tasks/{child['id']}/chain")
    await expect(nested).to_have_count(len(child_chain["steps"]), timeout=WAIT_MS)
    assert await numbered(nested) == of_chain(child_chain)
    await expect(block.locator('[data-step-type="tool_result"]')).to_contain_text("failed")
    await expect(failure.locator("code")).to_have_text(child["error_code"])
    await expect(failure).to_contain_text(child["error_message"])
    await photograph_chain(page, "sub-agents-child-failed.png")
    await expect(page.locator('[data-answer="final"]')).to_have_text(
        "The researcher could not find it."
    )


async def test_a_running_childs_steps_show_under_its_call_and_never_as_the_parents(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await define_agent(service, tenant, "researcher", tools=["calculator"])
    await define_agent(service, tenant, "lead", tools=["agent:researcher"])
    child_answer, parent_answer = asyncio.Event(), asyncio.Event()
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("agent__researcher", {"task": "What is 6 * 7?"})]),
        Reply.tool_calls([ToolCall("calculator", {"expression": "6 * 7"})]),
        Reply.text("6 * 7 = 42.", gate=child_answer),
        Reply.text("The researcher says 42.", gate=parent_answer),
    )
    async with service.client(tenant) as client:
        parent_id = (await submit(client, input="What is 6 * 7?", agent="lead"))["task_id"]
    # The child has called the calculator and waits for its model's answer.
    await service.fake_llm.wait_for_requests(3, MODEL)
    parent = await api_json(service, tenant, f"/api/v1/tasks/{parent_id}")
    await sign_in(page, service, await create_key(service, tenant, "member"), f"/tasks/{parent_id}")

    call = page.locator('li.step[data-step-type="tool_call"][data-tool="agent__researcher"]')
    block = sub_agent(call, "researcher")
    calculated = block.locator('li[data-tool="calculator"] > [data-step-type="tool_result"]')
    await expect(calculated).to_contain_text('"result": 42', timeout=WAIT_MS)
    await expect(block.locator(":scope > details")).to_have_attribute("open", "")
    await expect(block).to_have_attribute("data-child-status", "working")
    child_chain_id = await block.get_attribute("data-child-chain")
    assert child_chain_id
    assert child_chain_id != parent["chain_id"]
    # The parent: its call of the child runs, its own steps are its own, it has no answer.
    own = page.locator(OWN_STEPS)
    shown = await numbered(own)
    assert [kind for _, kind in shown] == ["tool_call", "tool_result", "tool_call"]
    assert [number for number, _ in shown] == [1, 2, 3]
    await expect(call.locator(".step-head .status").first).to_have_text("running")
    await expect(page.locator(".task-subtitle > .status")).to_have_text("working")
    await expect(page.locator('[data-answer="waiting"]')).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text="Following live…")).to_be_visible()
    await photograph_chain(page, "sub-agents-live-running.png")

    # The child answers and ends; the parent, asking its model again, has not.
    child_answer.set()
    await expect(block).to_have_attribute("data-child-status", "completed", timeout=WAIT_MS)
    await expect(block.locator('[data-child-answer="final"]')).to_contain_text("6 * 7 = 42.")
    await service.fake_llm.wait_for_requests(4, MODEL)
    await expect(own).to_have_count(5, timeout=WAIT_MS)
    await expect(call.locator(':scope > [data-step-type="tool_result"]')).to_contain_text(
        "6 * 7 = 42."
    )
    await expect(page.locator(".task-subtitle > .status")).to_have_text("working")
    await expect(page.locator('[data-answer="waiting"]')).to_be_visible()

    parent_answer.set()
    await expect(page.locator('[data-answer="final"]')).to_have_text(
        "The researcher says 42.", timeout=WAIT_MS
    )
    await expect(page.get_by_text("Following live…")).to_have_count(0, timeout=WAIT_MS)
    await expect(page.locator(".task-subtitle > .status")).to_have_text("completed")
    await expect(block).to_have_attribute("data-child-status", "completed")
    await expect(block.locator('[data-child-answer="final"]')).to_contain_text("6 * 7 = 42.")
    chain = await api_json(service, tenant, f"/api/v1/tasks/{parent_id}/chain")
    called = result_of(chain, "agent__researcher")
    child_chain = await api_json(service, tenant, f"/api/v1/tasks/{called['child_task_id']}/chain")
    assert child_chain["id"] == child_chain_id
    await expect(own).to_have_count(len(chain["steps"]))
    assert await numbered(own) == of_chain(chain)
    nested = page.locator(child_steps(child_chain_id))
    await expect(nested).to_have_count(len(child_chain["steps"]))
    assert await numbered(nested) == of_chain(child_chain)
    await photograph_chain(page, "sub-agents-live-finished.png")
