"""A service configured with an identity provider's JWKS: its RS256 tokens, with the
provider's own claim names, reach the API; tokens it did not sign do not."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from app.security import mint_token
from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.security.jwks_helpers import JWKSServer, SigningKey, idp, rsa_key, rsa_key_2
from tests.service import JWT_SECRET, Service, running_service, service_settings

__all__ = ["idp", "rsa_key", "rsa_key_2"]  # fixtures

ISSUER = "https://id.example.com/realms/acme"
AUDIENCE = "omniforge"


@pytest.fixture
async def keycloak_service(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, idp: JWKSServer
) -> AsyncIterator[Service]:
    settings = service_settings(
        tmp_path,
        database_url,
        fake_llm,
        jwt_jwks_url=idp.url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_tenant_claim="tenant",
        jwt_roles_claim="realm_access.roles",
    )
    async with running_service(settings, fake_llm) as service:
        yield service


def _keycloak_claims(tenant: str, **overrides: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "f1b2c3",
        "tenant": tenant,
        "realm_access": {"roles": ["tenant_admin", "offline_access"]},
        "iat": now,
        "exp": now + timedelta(minutes=5),
        **overrides,
    }


async def test_a_keycloak_token_verified_by_the_jwks_reaches_the_api(
    keycloak_service: Service, idp: JWKSServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    service = keycloak_service
    tenant = await service.create_tenant("kc-" + rsa_key.kid)
    idp.publish(rsa_key)
    good = rsa_key.sign(_keycloak_claims(tenant))
    forged = rsa_key_2.sign(_keycloak_claims(tenant), kid=rsa_key.kid)
    wrong_audience = rsa_key.sign(_keycloak_claims(tenant, aud="another-app"))
    async with service.client() as client:
        read = await client.get(
            f"/api/v1/tenants/{tenant}", headers={"Authorization": f"Bearer {good}"}
        )
        refused = [
            await client.get("/api/v1/tasks", headers={"Authorization": f"Bearer {token}"})
            for token in (forged, wrong_audience)
        ]

    assert read.status_code == 200, read.text  # tenant_admin, from realm_access.roles
    assert read.json()["id"] == tenant
    assert [assert_problem(r, 401, "unauthorized")["detail"] for r in refused] == [
        "the token's signature is invalid",
        "the token's audience is not accepted",
    ]


@pytest.fixture
async def production_with_idp(
    database_url: str, fake_llm: FakeLLMServer, tmp_path: Path, idp: JWKSServer
) -> AsyncIterator[Service]:
    """Production with an identity provider and an HS256 secret besides it."""
    settings = service_settings(
        tmp_path,
        database_url,
        fake_llm,
        env="production",
        jwt_jwks_url=idp.url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
    )
    async with running_service(settings, fake_llm) as service:
        yield service


async def test_hs256_tokens_need_the_configured_issuer_and_audience_too(
    production_with_idp: Service,
) -> None:
    service = production_with_idp
    tenant = await service.create_tenant("hs-" + uuid4().hex[:8])

    def hs256(issuer: str | None = None, audience: str | None = None) -> str:
        token = mint_token(
            JWT_SECRET,
            tenant_id=tenant,
            subject="alice",
            roles=["member"],
            issuer=issuer,
            audience=audience,
        )
        return f"Bearer {token}"

    async with service.client() as client:
        answers = [
            await client.get("/api/v1/tasks", headers={"Authorization": authorization})
            for authorization in (
                hs256(),
                hs256(issuer="https://evil.example.com", audience=AUDIENCE),
                hs256(issuer=ISSUER, audience="another-app"),
                hs256(issuer=ISSUER, audience=AUDIENCE),
            )
        ]

    assert [assert_problem(r, 401, "unauthorized")["detail"] for r in answers[:3]] == [
        "the token has no `iss` claim",
        "the token's issuer is not accepted",
        "the token's audience is not accepted",
    ]
    assert answers[3].status_code == 200, answers[3].text
