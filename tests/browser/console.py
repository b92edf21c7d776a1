"""Helpers for the console's browser tests: keys made through the API, signing in as a person
would (typing the key into the sign-in page), and waits that end on what the page shows."""

from typing import Any

from playwright.async_api import Page, expect

from tests.service import Service

# Every wait ends on a condition in the page; this only bounds a broken console.
WAIT_MS = 20_000


async def create_key(service: Service, tenant: str, *roles: str, name: str = "console") -> str:
    """A new API key of `tenant` with `roles` (created by its admin), its secret."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.post(
            "/api/v1/api-keys", json={"name": name, "roles": list(roles or ("member",))}
        )
    assert response.status_code == 201, response.text
    secret: str = response.json()["secret"]
    return secret


def console_url(service: Service, path: str = "/") -> str:
    return f"{service.base_url}/console{path}"


async def sign_in(page: Page, service: Service, credential: str, path: str = "/") -> None:
    """Opens the console at `path`, signs in with `credential` and waits for the console."""
    await page.goto(console_url(service, path))
    await page.get_by_label("API key or token").fill(credential)
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_role("navigation", name="Console")).to_be_visible(timeout=WAIT_MS)


async def api_json(service: Service, tenant: str, path: str, **params: Any) -> Any:
    """GETs `path` as the tenant's admin: what the API says, to compare the console with."""
    async with service.client(tenant, sub="root", roles=("tenant_admin",)) as admin:
        response = await admin.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()
