"""The console's settings of a tenant: API keys made and revoked (the secret shown once, and
working against the API until revoked), quotas saved as the API then answers them (and the API's
field error shown beside its field), secrets listed by name only, MCP servers with their status;
and the page refused, politely, to roles that configure nothing."""

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from playwright.async_api import ConsoleMessage, Error, Page, expect

from tests.api.helpers import configure, open_network
from tests.browser.conftest import SCREENSHOTS, OfflinePage
from tests.browser.console import WAIT_MS, api_json, console_url, create_key, sign_in
from tests.fakes.mcp_server import TOKEN, FakeMcpServer
from tests.service import Service


@pytest.fixture
async def mcp_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


async def me_with(service: Service, secret: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
        return await client.get("/api/v1/me", headers={"Authorization": f"Bearer {secret}"})


def problems_of(page: Page) -> list[str]:
    """Collects the page's console errors and uncaught exceptions from now on."""
    seen: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.append(message.text)

    def on_error(error: Error) -> None:
        seen.append(str(error))

    page.on("console", on_console)
    page.on("pageerror", on_error)
    return seen


async def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / f"settings-{name}.png", full_page=True)


async def test_an_admin_creates_a_key_shown_once_that_works_until_revoked_in_the_console(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    await sign_in(
        page, service, await create_key(service, tenant, "tenant_admin", name="admin"), "/settings"
    )
    await page.get_by_role("tab", name="API keys").click()
    await expect(page).to_have_url(console_url(service, "/settings?section=keys"))
    await expect(page.get_by_role("row").filter(has_text="this session")).to_contain_text("admin")

    form = page.get_by_role("form", name="Create an API key")
    await form.get_by_label("Key name").fill("reporting")
    await form.get_by_role("checkbox", name="member").uncheck()
    await form.get_by_role("checkbox", name="viewer").check()
    await form.get_by_text("Limits for this key (optional)").click()
    await form.get_by_label("Cost per day (USD)", exact=True).fill("5")
    await form.get_by_role("button", name="Create key").click()

    shown = page.get_by_role("region", name="New API key")
    await expect(shown).to_contain_text("shown only this once", timeout=WAIT_MS)
    secret = await shown.get_by_label("New API key secret").input_value()
    assert secret.startswith("omf_")
    await expect(shown.get_by_role("button", name="Copy")).to_be_visible()
    await shot(page, "api-key-created")

    me = await me_with(service, secret)
    assert me.status_code == 200, me.text
    assert me.json()["api_key"]["name"] == "reporting"
    assert me.json()["roles"] == ["viewer"]

    keys = await api_json(service, tenant, "/api/v1/api-keys")
    (made,) = [key for key in keys["items"] if key["name"] == "reporting"]
    assert secret.startswith(made["prefix"])
    assert made["quotas"]["cost_per_day_usd"] == "5"
    row = page.get_by_role("row").filter(has_text="reporting")
    await expect(row).to_contain_text(made["prefix"])
    await expect(row).to_contain_text("viewer")
    await expect(row).to_contain_text("$5.00/day")
    await expect(row.get_by_text("active", exact=True)).to_be_visible()

    await shown.get_by_role("button", name="Done, I have saved it").click()
    await expect(shown).to_have_count(0)
    assert secret not in await page.content()

    await row.get_by_role("button", name="Revoke reporting").click()
    await expect(row.get_by_role("group")).to_contain_text("It stops working at once.")
    await shot(page, "api-key-revoke-confirm")
    await row.get_by_role("button", name="Revoke key").click()
    await expect(
        page.get_by_role("status").filter(has_text="Key reporting revoked.")
    ).to_be_visible(timeout=WAIT_MS)
    await expect(page.get_by_role("row").filter(has_text="reporting")).to_have_count(0)
    refused = await me_with(service, secret)
    assert refused.status_code == 401, refused.text

    await page.get_by_role("checkbox", name="Show revoked keys").check()
    await expect(
        page.get_by_role("row").filter(has_text="reporting").get_by_text("revoked", exact=True)
    ).to_be_visible(timeout=WAIT_MS)
    assert errors == []


async def test_quotas_saved_in_the_console_are_what_the_api_answers_and_its_field_errors_show(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    key = await create_key(service, tenant, "tenant_admin", name="admin")
    await sign_in(page, service, key, "/settings?section=quotas")
    form = page.get_by_role("form", name="Quotas")

    await form.get_by_label("Submissions per minute", exact=True).fill("30")
    await form.get_by_label("Tokens per hour", exact=True).fill("200000")
    await form.get_by_label("Cost per day (USD)", exact=True).fill("12.50")
    await form.get_by_label("Max wait (seconds)", exact=True).fill("5")
    await form.get_by_label("Max tokens", exact=True).fill("50000")
    await form.get_by_role("button", name="Save quotas").click()
    await expect(page.get_by_role("status").filter(has_text="Quotas saved.")).to_be_visible(
        timeout=WAIT_MS
    )

    quotas: dict[str, Any] = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/quotas")
    assert quotas["submissions_per_minute"] == 30
    assert quotas["tokens_per_hour"] == 200000
    assert quotas["cost_per_day_usd"] == "12.50"
    assert quotas["max_wait_s"] == 5
    assert quotas["default_budget"]["max_tokens"] == 50000
    assert quotas["concurrent_runs"] is None
    await shot(page, "quotas-saved")

    concurrent = form.get_by_label("Concurrent runs", exact=True)
    await concurrent.fill("0")
    await form.get_by_role("button", name="Save quotas").click()
    await expect(concurrent).to_have_accessible_description(
        re.compile("greater than 0"), timeout=WAIT_MS
    )
    await expect(concurrent).to_have_attribute("aria-invalid", "true")
    await expect(form.get_by_role("alert")).to_be_visible()
    after = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/quotas")
    assert after == quotas
    # The browser logs the refused PUT itself; nothing else went wrong.
    assert [error for error in errors if "status of 422" not in error] == []


async def test_a_secret_set_in_the_console_is_listed_by_name_and_mcp_servers_show_their_status(
    service: Service, tenant: str, offline_page: OfflinePage, mcp_server: FakeMcpServer
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    await open_network(service, tenant, ["127.0.0.1/32"])
    await sign_in(
        page,
        service,
        await create_key(service, tenant, "tenant_admin", name="admin"),
        "/settings?section=secrets",
    )

    form = page.get_by_role("form", name="Set a secret")
    await form.get_by_label("Secret name").fill("MCP_TOKEN")
    await form.get_by_label("Secret value").fill(TOKEN)
    await form.get_by_role("button", name="Save secret").click()
    await expect(page.get_by_role("row").filter(has_text="MCP_TOKEN")).to_be_visible(
        timeout=WAIT_MS
    )
    await expect(form.get_by_label("Secret value")).to_have_value("")
    shown = await page.evaluate(
        "() => document.body.innerText + [...document.querySelectorAll('input, textarea')]"
        ".map((field) => field.value).join(' ')"
    )
    assert TOKEN not in shown
    assert TOKEN not in await page.content()
    listed = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/secrets")
    assert [secret["name"] for secret in listed["items"]] == ["MCP_TOKEN"]
    await shot(page, "secrets")

    # One server the service cannot reach (a closed port), registered through the API.
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        closed = await admin.post(
            f"/api/v1/tenants/{tenant}/mcp-servers",
            json={"name": "broken", "url": "http://127.0.0.1:9/mcp"},
        )
    assert closed.status_code == 201, closed.text
    assert closed.json()["status"] == "error"

    await page.get_by_role("tab", name="MCP servers").click()
    await expect(page).to_have_url(console_url(service, "/settings?section=mcp"))
    broken = page.get_by_role("row").filter(has_text="broken")
    await expect(broken.get_by_text("error", exact=True)).to_be_visible(timeout=WAIT_MS)
    await expect(broken).to_contain_text(closed.json()["status_detail"])

    # One the console registers: the fake MCP server, its token from the secret.
    register = page.get_by_role("form", name="Register an MCP server")
    await register.get_by_label("Server name").fill("fake")
    await register.get_by_label("Server URL").fill(mcp_server.url)
    await register.get_by_role("button", name="Add a header").click()
    await register.get_by_label("Header 1 name").fill("Authorization")
    await register.get_by_label("Header 1 secret").fill("MCP_TOKEN")
    await register.get_by_role("button", name="Register server").click()
    await expect(register.get_by_role("status")).to_contain_text(
        "fake registered: 3 tools", timeout=WAIT_MS
    )

    fake = page.get_by_role("row").filter(has_text="fake").filter(has_text=mcp_server.url)
    await expect(fake.get_by_text("ok", exact=True)).to_be_visible(timeout=WAIT_MS)
    await expect(fake.get_by_role("cell").nth(3)).to_have_text("3")
    servers = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/mcp-servers")
    (registered,) = [server for server in servers["items"] if server["name"] == "fake"]
    assert registered["headers"] == {"Authorization": {"secret": "MCP_TOKEN", "prefix": "Bearer "}}
    assert registered["status"] == "ok"

    await fake.get_by_role("button", name="Show tools of fake").click()
    await expect(page.get_by_role("cell", name="fake__add", exact=True)).to_be_visible()
    await broken.get_by_role("button", name="Refresh broken").click()
    await expect(page.get_by_role("status").filter(has_text="broken: error.")).to_be_visible(
        timeout=WAIT_MS
    )
    assert TOKEN not in await page.content()
    # What platform admins opened for the tenant is shown beside its own list, not edited.
    network = page.get_by_role("form", name="Network allow-list")
    await expect(network).to_contain_text("Opened by platform admins: 127.0.0.1/32")
    await shot(page, "mcp-servers")
    assert errors == []


@pytest.mark.parametrize("role", ["member", "auditor"])
async def test_roles_that_configure_nothing_see_no_settings_and_are_told_they_may_not(
    service: Service, tenant: str, offline_page: OfflinePage, role: str
) -> None:
    page = offline_page.page
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await sign_in(page, service, await create_key(service, tenant, role, name=role))

    navigation = page.get_by_role("navigation", name="Console")
    await expect(navigation.get_by_role("link").first).to_be_visible()
    await expect(navigation.get_by_role("link", name="Settings")).to_have_count(0)

    errors = problems_of(page)
    requests.clear()
    await page.goto(console_url(service, "/settings?section=keys"))
    await expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible(
        timeout=WAIT_MS
    )
    await expect(page.get_by_role("status")).to_contain_text(
        "You may not change this tenant's settings"
    )
    await expect(page.get_by_role("tab")).to_have_count(0)
    assert not [url for url in requests if "/tenants/" in url or "/api-keys" in url]
    assert errors == []


async def test_the_other_sections_show_the_tenants_models_and_visibility(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    errors = problems_of(page)
    await configure(
        service,
        tenant,
        "visibility",
        {"tool_types": {"external": "summary"}, "sensitive_fields": ["ssn"]},
    )
    await sign_in(
        page,
        service,
        await create_key(service, tenant, "tenant_admin", name="admin"),
        "/settings?section=visibility",
    )
    form = page.get_by_role("form", name="Visibility settings")
    await expect(form.get_by_label("Level for tool type external")).to_have_value(
        "summary", timeout=WAIT_MS
    )
    await expect(form.get_by_label("Extra field names to redact")).to_have_value("ssn")
    await form.get_by_label("Level for tool type database").select_option("hidden")
    await form.get_by_label("Rules by role (JSON)").fill('{"viewer": {"tools": {"llm": "nope"}}}')
    await form.get_by_role("button", name="Save visibility settings").click()
    await expect(form.get_by_label("Rules by role (JSON)")).to_have_accessible_description(
        re.compile("viewer.tools.llm"), timeout=WAIT_MS
    )
    await form.get_by_label("Rules by role (JSON)").fill('{"viewer": {"tools": {"llm": "hidden"}}}')
    await form.get_by_role("button", name="Save visibility settings").click()
    await expect(
        page.get_by_role("status").filter(has_text="Visibility settings saved.")
    ).to_be_visible(timeout=WAIT_MS)
    policy = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/visibility")
    assert policy["tool_types"] == {"external": "summary", "database": "hidden"}
    assert policy["roles"] == {"viewer": {"tool_types": {}, "tools": {"llm": "hidden"}}}
    await shot(page, "visibility")

    await page.get_by_role("tab", name="Models").click()
    models = await api_json(service, tenant, "/api/v1/models")
    first = models["items"][0]["name"]
    table = page.get_by_role("table").filter(has_text="Input /1M")
    await expect(table.get_by_role("row").filter(has_text=first)).to_be_visible(timeout=WAIT_MS)
    policy_form = page.get_by_role("form", name="Model policy")
    await policy_form.get_by_role("button", name="Add a cap").click()
    await policy_form.get_by_label("Cap 1 model or pattern").fill(first)
    await policy_form.get_by_label("Cap 1 tokens").fill("1024")
    await policy_form.get_by_role("button", name="Save model policy").click()
    await expect(page.get_by_role("status").filter(has_text="Model policy saved.")).to_be_visible(
        timeout=WAIT_MS
    )
    await expect(table.get_by_role("row").filter(has_text=first)).to_contain_text("1,024")
    saved = await api_json(service, tenant, f"/api/v1/tenants/{tenant}/models")
    assert saved["max_output_tokens"] == {first: 1024}
    # The browser logs the refused PUT itself; nothing else went wrong.
    assert [error for error in errors if "status of 422" not in error] == []
