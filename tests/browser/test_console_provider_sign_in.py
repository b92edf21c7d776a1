"""Signing in to the console with the identity provider: authorization code with PKCE, the
provider's token verified by the service through its JWKS."""

from pathlib import Path
from uuid import uuid4

from playwright.async_api import expect

from tests.browser.conftest import OfflinePage
from tests.browser.console import WAIT_MS, console_url
from tests.fakes.identity_provider import identity_provider
from tests.fakes.openai_server import FakeLLMServer
from tests.security.jwks_helpers import SigningKey, rsa_key
from tests.service import running_service, service_settings

__all__ = ["rsa_key"]  # fixture

ISSUER = "https://id.example.com/realms/acme"
AUDIENCE = "omniforge"


async def test_a_person_signs_in_through_the_identity_provider_with_pkce(
    database_url: str,
    shared_fake_llm: FakeLLMServer,
    tmp_path: Path,
    rsa_key: SigningKey,
    offline_page: OfflinePage,
) -> None:
    tenant = f"t-{uuid4().hex[:12]}"
    claims = {"sub": "grace", "tenant_id": tenant, "roles": ["tenant_admin"]}
    async with identity_provider(
        rsa_key, issuer=ISSUER, audience=AUDIENCE, claims=claims
    ) as provider:
        settings = service_settings(
            tmp_path,
            database_url,
            shared_fake_llm,
            jwt_jwks_url=provider.jwks_url,
            jwt_issuer=ISSUER,
            jwt_audience=AUDIENCE,
            console_oidc_client_id="omniforge-console",
            console_oidc_authorization_url=provider.authorization_url,
            console_oidc_token_url=provider.token_url,
        )
        async with running_service(settings, shared_fake_llm) as service:
            await service.create_tenant(tenant)
            page = offline_page.page
            await page.goto(console_url(service, "/"))
            await page.get_by_role("button", name="Sign in with your identity provider").click()

            navigation = page.get_by_role("navigation", name="Console")
            await expect(navigation).to_contain_text("grace", timeout=WAIT_MS)
            await expect(navigation).to_contain_text(f"Tenant {tenant}")
            await expect(navigation.get_by_role("link", name="Settings")).to_be_visible()
            # The code and the state have left the URL.
            await expect(page).to_have_url(console_url(service, "/tasks"))

    [asked] = provider.authorizations
    assert (asked.client_id, asked.method, asked.scope) == (
        "omniforge-console",
        "S256",
        "openid profile",
    )
    assert asked.redirect_uri == console_url(service, "/")
    [exchange] = provider.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert exchange["redirect_uri"] == asked.redirect_uri
    assert len(exchange["code_verifier"]) >= 43  # RFC 7636: 43 to 128 characters
