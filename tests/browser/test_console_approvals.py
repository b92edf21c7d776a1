"""Human approval of tool calls in the console. With the tenant's rule "every calculator call
waits for a person", a task's run suspends (`input_required`) on its calculator call; an admin
finds the call in the approvals inbox, edits its arguments (the page refuses text that is not a
JSON object) and approves it: the call leaves the inbox, the tool runs with the edited
arguments, and the task page — followed live meanwhile — shows the run suspended, the decision
and the run resuming. A call denied (with a reason) from the task page is not made: the
model is told it was denied, and why; an argument the tool's schema refuses is shown with its
field. A member the tenant does not show the call's arguments sees it without them, and is
refused a decision."""

import asyncio
import json
import re
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.api.helpers import configure, stream, submit
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, create_key, sign_in
from tests.fakes.openai_server import Reply, ToolCall
from tests.service import MODEL, Service
from tests.sse import read_sse

# Every calculator call of the tenant waits for a person, however long.
CALCULATOR_ALWAYS = {"tools": {"calculator": "always"}, "types": {}, "timeout_s": None}
ASKED = {"expression": "6 * 7"}
EDITED = {"expression": "6 * 8"}
APPROVE_REASON = "Checked: it is six eights."
DENY_REASON = "No arithmetic for this customer."
ANSWER = "6 * 8 = 48."


async def until_suspended(service: Service, tenant: str, task_id: str) -> dict[str, Any]:
    """Follows the task's stream until its run has asked for an approval and suspended
    (`approval_required`, then `task_status` `input_required`, in either order): the data of
    the `approval_required` event."""
    required: dict[str, Any] | None = None
    suspended = False
    async with (
        service.client(tenant, sub="root", roles=("tenant_admin",)) as admin,
        asyncio.timeout(WAIT_MS / 1000),
        admin.stream("GET", f"/api/v1/tasks/{task_id}/events") as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for event in read_sse(response):
            assert event.event not in ("done", "chain_failed"), event
            if event.event == "approval_required":
                required = event.json
            elif event.event == "task_status" and event.json["state"] == "input_required":
                suspended = True
            if required is not None and suspended:
                return required
    raise AssertionError("the stream ended before the run suspended for an approval")


async def finished(service: Service, tenant: str, task_id: str) -> dict[str, Any]:
    """Reads the task's stream to its end; the task as the API then states it."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        events = await stream(admin, task_id)
    assert events[-1].event == "done", events[-1]
    task: dict[str, Any] = await api_json(service, tenant, f"/api/v1/tasks/{task_id}")
    return task


def calculator_results(chain: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of the chain's calculator calls, in step order."""
    calls = {
        step["tool_call"]["correlation_id"]
        for step in chain["steps"]
        if step["tool_call"] and step["tool_call"]["tool_name"] == "calculator"
    }
    return [
        step["tool_result"]
        for step in chain["steps"]
        if step["tool_result"] and step["tool_result"]["correlation_id"] in calls
    ]


async def open_inbox(page: Page, service: Service, key: str, path: str = "/approvals") -> None:
    await sign_in(page, service, key, path)
    await expect(page.get_by_role("heading", name="Approvals", exact=True)).to_be_visible(
        timeout=WAIT_MS
    )


async def subject_of(service: Service, key: str) -> str:
    """Who the API says holds `key` (the approvals name their decider so)."""
    async with httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        response = await client.get("/api/v1/me")
    assert response.status_code == 200, response.text
    subject: str = response.json()["subject"]
    return subject


async def test_an_admin_edits_a_waiting_calls_arguments_and_approves_and_the_chain_shows_it(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    chain_page = offline_page.page
    errors: list[str] = []
    chain_page.on("pageerror", lambda error: errors.append(str(error)))
    await configure(service, tenant, "approvals", CALCULATOR_ALWAYS)
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", ASKED, id="c1")]),
        Reply.text(ANSWER),
    )
    async with service.client(tenant) as member:
        task_id = (await submit(member, input="What is six times seven?"))["task_id"]
    required = await until_suspended(service, tenant, task_id)
    approval_id = required["approval_id"]
    assert required["tool_name"] == "calculator"
    assert required["arguments"] == ASKED
    task = await api_json(service, tenant, f"/api/v1/tasks/{task_id}")
    assert task["status"] == "input_required"
    pending = await api_json(service, tenant, "/api/v1/approvals", status="pending")
    assert [item["id"] for item in pending["items"]] == [approval_id]

    # The task page, followed live: the run waits for the calculator's approval.
    admin_key = await create_key(service, tenant, "tenant_admin", name="approver")
    approver = await subject_of(service, admin_key)
    await sign_in(chain_page, service, admin_key, f"/tasks/{task_id}")
    await expect(chain_page.locator(".page-head .status")).to_have_text(
        "input_required", timeout=WAIT_MS
    )
    banner = chain_page.get_by_role("status").filter(has_text="Waiting for approval of")
    await expect(banner).to_contain_text("Waiting for approval of calculator")
    call = chain_page.locator('li.step[data-step-type="tool_call"][data-tool="calculator"]')
    shown = call.locator(f'.approval[data-approval-id="{approval_id}"]')
    await expect(shown).to_have_attribute("data-approval-status", "pending", timeout=WAIT_MS)
    await expect(shown.locator('[data-marker="suspended"]')).to_contain_text(
        "Waiting for approval of calculator"
    )
    await expect(call.locator(".step-head .status")).to_have_text("awaiting approval")
    await chain_page.screenshot(path=SCREENSHOTS / "approvals-chain-waiting.png", full_page=True)

    # Another tab: the task list says the task waits; the inbox holds its call.
    inbox = await chain_page.context.new_page()
    inbox.on("pageerror", lambda error: errors.append(str(error)))
    await sign_in(inbox, service, admin_key, "/tasks?status=input_required")
    row = inbox.locator(f'tr[data-task-id="{task_id}"]')
    await expect(row.locator(".status")).to_have_text("input_required", timeout=WAIT_MS)
    await (
        inbox.get_by_role("navigation", name="Console")
        .get_by_role("link", name="Approvals")
        .click()
    )
    item = inbox.locator(f'li.approval-item[data-approval-id="{approval_id}"]')
    await expect(item).to_contain_text("calculator", timeout=WAIT_MS)
    await expect(item.get_by_role("link", name=task_id[:8])).to_be_visible()
    editor = item.get_by_label("Arguments (JSON)")
    await expect(editor).to_have_value(json.dumps(ASKED, indent=2))

    # Text that is not a JSON object is refused on the page, before anything is sent.
    approve = item.get_by_role("button", name="Approve")
    await editor.fill('{"expression": "6 * 8"')
    await expect(item.get_by_role("alert")).to_contain_text("Not valid JSON")
    await expect(approve).to_be_disabled()
    await editor.fill('["6 * 8"]')
    await expect(item.get_by_role("alert")).to_have_text("The arguments must be a JSON object.")
    await expect(approve).to_be_disabled()

    await editor.fill(json.dumps(EDITED))
    await expect(item.get_by_role("alert")).to_have_count(0)
    await item.get_by_label("Reason (optional)").fill(APPROVE_REASON)
    await inbox.screenshot(path=SCREENSHOTS / "approvals-inbox-edited.png")
    await approve.click()
    await expect(item).to_have_count(0, timeout=WAIT_MS)
    await expect(inbox.get_by_role("status", name="Decisions")).to_have_text(
        f"Approved the calculator call of task {task_id[:8]} with edited arguments."
    )
    await expect(inbox.get_by_text("No tool call is waiting for a decision.")).to_be_visible()

    # The task page, still following, shows the decision, the run resuming and the answer.
    await expect(shown).to_have_attribute("data-approval-status", "approved", timeout=WAIT_MS)
    decision = shown.locator('[data-decision="approved"]')
    await expect(decision).to_contain_text(f"Approved with edited arguments by {approver}")
    await expect(decision).to_contain_text(APPROVE_REASON)
    await expect(decision.locator(".decided-arguments pre")).to_have_text(
        json.dumps(EDITED, indent=2)
    )
    await expect(shown.locator('[data-marker="suspended"]')).to_contain_text("Run suspended at")
    await expect(shown.locator('[data-marker="resumed"]')).to_contain_text(
        "Run resumed at", timeout=WAIT_MS
    )
    await expect(chain_page.locator('[data-answer="final"] .answer-text')).to_have_text(
        ANSWER, timeout=WAIT_MS
    )
    await expect(chain_page.get_by_text("Following live…")).to_have_count(0, timeout=WAIT_MS)
    await expect(chain_page.locator(".page-head .status")).to_have_text("completed")
    await expect(banner).to_have_count(0)
    await expect(call.locator('[data-step-type="tool_result"]')).to_contain_text('"result": 48')
    await chain_page.screenshot(path=SCREENSHOTS / "approvals-chain-live.png", full_page=True)

    # The API agrees: the tool ran with the edited arguments, and the model read its result.
    task = await finished(service, tenant, task_id)
    assert task["status"] == "completed"
    assert task["answer"] == ANSWER
    chain = await api_json(service, tenant, f"/api/v1/tasks/{task_id}/chain")
    [result] = calculator_results(chain)
    assert result["success"] is True
    assert result["result"] == {"expression": EDITED["expression"], "result": 48}
    [decided] = (await api_json(service, tenant, f"/api/v1/tasks/{task_id}/approvals"))["items"]
    assert decided["status"] == "approved"
    assert decided["decided_arguments"] == EDITED
    assert decided["decided_by"] == approver
    assert decided["reason"] == APPROVE_REASON
    second = service.fake_llm.requests_for(MODEL)[1].body["messages"]
    assert any(m["role"] == "tool" and "48" in str(m["content"]) for m in second), second

    # Read back whole once finished, the chain still shows what was decided.
    await chain_page.reload()
    await expect(shown.locator('[data-decision="approved"]')).to_contain_text(
        f"Approved with edited arguments by {approver}", timeout=WAIT_MS
    )
    await expect(shown.locator('[data-marker="resumed"]')).to_contain_text("Run resumed at")
    await chain_page.screenshot(path=SCREENSHOTS / "approvals-chain-read-back.png", full_page=True)
    await inbox.close()
    assert errors == []


async def test_a_call_denied_on_the_task_page_is_not_made_and_the_model_is_told_why(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await configure(service, tenant, "approvals", CALCULATOR_ALWAYS)
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "2 ** 10"}, id="c1")]),
        Reply.text("I was not allowed to calculate that."),
    )
    async with service.client(tenant) as member:
        task_id = (await submit(member, input="What is two to the tenth?"))["task_id"]
    approval_id = (await until_suspended(service, tenant, task_id))["approval_id"]
    admin_key = await create_key(service, tenant, "tenant_admin", name="approver")
    approver = await subject_of(service, admin_key)
    await sign_in(page, service, admin_key, f"/tasks/{task_id}")
    shown = page.locator(f'li[data-tool="calculator"] .approval[data-approval-id="{approval_id}"]')
    await expect(shown).to_have_attribute("data-approval-status", "pending", timeout=WAIT_MS)
    form = shown.get_by_role("form", name="Decide on the calculator call")

    # Arguments the tool's schema refuses: the API's problem, with its field, on the page.
    await form.get_by_label("Arguments (JSON)").fill(json.dumps({"expression": 1024}))
    await form.get_by_role("button", name="Approve").click()
    problem = form.get_by_role("alert")
    await expect(problem).to_contain_text("body.arguments.expression", timeout=WAIT_MS)
    await expect(shown).to_have_attribute("data-approval-status", "pending")

    await form.get_by_label("Reason (optional)").fill(DENY_REASON)
    await form.get_by_role("button", name="Deny").click()
    await expect(shown).to_have_attribute("data-approval-status", "denied", timeout=WAIT_MS)
    await expect(form).to_have_count(0)
    decision = shown.locator('[data-decision="denied"]')
    await expect(decision).to_contain_text(f"Denied by {approver}")
    await expect(decision).to_contain_text(DENY_REASON)
    await expect(shown.locator('[data-marker="resumed"]')).to_contain_text(
        "Run resumed at", timeout=WAIT_MS
    )
    await expect(page.locator('[data-answer="final"] .answer-text')).to_have_text(
        "I was not allowed to calculate that.", timeout=WAIT_MS
    )
    call = page.locator('li.step[data-step-type="tool_call"][data-tool="calculator"]')
    await expect(call.locator('[data-step-type="tool_result"]')).to_contain_text("approval_denied")
    await page.screenshot(path=SCREENSHOTS / "approvals-chain-denied.png", full_page=True)

    task = await finished(service, tenant, task_id)
    assert task["status"] == "completed"
    chain = await api_json(service, tenant, f"/api/v1/tasks/{task_id}/chain")
    [result] = calculator_results(chain)
    assert result["success"] is False
    assert result["error_code"] == "approval_denied"
    told = [
        str(message["content"])
        for message in service.fake_llm.requests_for(MODEL)[1].body["messages"]
        if message["role"] == "tool"
    ]
    assert len(told) == 1, told
    assert "denied" in told[0].lower(), told
    assert DENY_REASON in told[0], told

    # The inbox holds nothing pending; its history says who denied it, and why.
    await (
        page.get_by_role("navigation", name="Console").get_by_role("link", name="Approvals").click()
    )
    await expect(page.get_by_text("No tool call is waiting for a decision.")).to_be_visible(
        timeout=WAIT_MS
    )
    await (
        page.get_by_role("search", name="Filter approvals")
        .get_by_label("Status")
        .select_option("denied")
    )
    item = page.locator(f'li.approval-item[data-approval-id="{approval_id}"]')
    await expect(item.locator('[data-decision="denied"]')).to_contain_text(
        f"Denied by {approver}", timeout=WAIT_MS
    )
    await expect(item.locator('[data-decision="denied"]')).to_contain_text(DENY_REASON)
    await expect(page).to_have_url(re.compile(r"/console/approvals\?status=denied$"))


# Members see the calculator's steps as summaries: its calls' arguments are not theirs to read.
CALCULATOR_SUMMARISED = {"roles": {"member": {"tools": {"calculator": "summary"}}}}


async def test_a_member_not_shown_a_calls_arguments_sees_it_without_them_and_may_not_decide(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await configure(service, tenant, "approvals", CALCULATOR_ALWAYS)
    await configure(service, tenant, "visibility", CALCULATOR_SUMMARISED)
    service.fake_llm.script(
        MODEL,
        Reply.tool_calls([ToolCall("calculator", {"expression": "7 * 191"}, id="c1")]),
        Reply.text("Nobody let me calculate."),
    )
    member_key = await create_key(service, tenant, "member", name="member")
    async with httpx.AsyncClient(
        base_url=service.base_url, headers={"Authorization": f"Bearer {member_key}"}, timeout=30
    ) as member:  # the member's own task: its agent does not let its submitter decide
        task_id = (await submit(member, input="What is 7 * 191?"))["task_id"]
    approval_id = (await until_suspended(service, tenant, task_id))["approval_id"]

    await open_inbox(page, service, member_key)
    item = page.locator(f'li.approval-item[data-approval-id="{approval_id}"]')
    await expect(item).to_contain_text(
        "Your roles do not let you see this call's arguments.", timeout=WAIT_MS
    )
    await expect(item.get_by_label("Arguments (JSON)")).to_have_count(0)
    assert "7 * 191" not in await item.inner_text()
    await item.get_by_role("button", name="Approve").click()
    await expect(item.get_by_role("alert")).to_contain_text("task:approve", timeout=WAIT_MS)
    await expect(item).to_have_count(1)

    # The tenant's admin denies it, which ends the run.
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.post(
            f"/api/v1/tasks/{task_id}/approvals/{approval_id}", json={"decision": "deny"}
        )
    assert response.status_code == 200, response.text
    assert (await finished(service, tenant, task_id))["status"] == "completed"
