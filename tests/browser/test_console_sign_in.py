"""Signing in to the console: with an API key typed into the sign-in page, offline; a wrong key
is refused with the API's own words; signing out forgets the key."""

from playwright.async_api import expect

from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, console_url, create_key, sign_in
from tests.service import Service


async def test_a_person_signs_in_with_an_api_key_and_sees_their_tenant(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    key = await create_key(service, tenant, "member", name="ci-key")

    await sign_in(page, service, key)

    navigation = page.get_by_role("navigation", name="Console")
    await expect(navigation).to_contain_text(f"Tenant {tenant}")
    await expect(navigation).to_contain_text("key “ci-key”")
    await expect(navigation.get_by_role("link")).to_have_text(
        # A member: no costs, no settings; approvals (a submitter may decide where the agent
        # allows it).
        ["Tasks", "Approvals", "Conversations", "Agents", "Schedules"]
    )
    await expect(page).to_have_url(console_url(service, "/tasks"))


async def test_a_wrong_key_is_refused_and_signing_out_forgets_the_key(
    service: Service, tenant: str, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    await page.goto(console_url(service))
    await page.get_by_label("API key or token").fill("omf_" + "x" * 43)
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_role("alert")).to_contain_text("API key", timeout=WAIT_MS)

    await sign_in(page, service, await create_key(service, tenant, "tenant_admin"))
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("API key or token")).to_be_visible()
    await page.reload()
    await expect(page.get_by_label("API key or token")).to_be_visible(timeout=WAIT_MS)
    assert await page.evaluate("() => sessionStorage.length") == 0
