"""Browsers on other origins: the configured origins' preflights are answered without a token
and their answers carry CORS headers; no other origin gets any, and none is allowed by
default."""

from collections.abc import AsyncIterator
from uuid import uuid4

import httpx
import pytest
from pydantic import ValidationError

from app.config import Settings
from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings

ORIGIN = "https://console.example.com"
NOT_LISTED = [
    "https://elsewhere.example.com",
    "https://console.example.com.elsewhere.example",  # a suffix is not the origin
    "http://console.example.com",  # nor another scheme
    "https://console.example.com:8443",  # nor another port
    "null",  # sandboxed pages and file:// URLs
]
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
}


@pytest.fixture(scope="module")
async def cors_service(
    database_url: str, shared_fake_llm: FakeLLMServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Service]:
    """A service whose API is open to pages of ORIGIN."""
    settings = service_settings(
        tmp_path_factory.mktemp("cors"), database_url, shared_fake_llm, cors_origins=[ORIGIN]
    )
    async with running_service(settings, shared_fake_llm) as service:
        yield service


def _cors_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.startswith("access-control-")
    }


async def test_a_listed_origins_preflight_is_answered_without_a_token(
    cors_service: Service,
) -> None:
    async with cors_service.client() as browser:
        response = await browser.options("/api/v1/tasks", headers={"Origin": ORIGIN, **PREFLIGHT})

    assert response.status_code == 200, response.text
    headers = _cors_headers(response)
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in headers["access-control-allow-methods"].split(", ")
    allowed = {name.strip().lower() for name in headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "idempotency-key", "last-event-id"} <= allowed
    assert headers["access-control-max-age"] == "600"
    assert "access-control-allow-credentials" not in headers  # bearer tokens, not cookies
    assert "www-authenticate" not in response.headers


async def test_a_listed_origin_reads_answers_their_headers_and_refusals(
    cors_service: Service,
) -> None:
    tenant = await cors_service.create_tenant(f"t-{uuid4().hex[:12]}")
    async with cors_service.client(tenant) as page, cors_service.client() as anonymous:
        listed = await page.get("/api/v1/tasks", headers={"Origin": ORIGIN})
        refused = await anonymous.get("/api/v1/tasks", headers={"Origin": ORIGIN})

    assert listed.status_code == 200, listed.text
    for response in (listed, refused):
        assert response.headers["access-control-allow-origin"] == ORIGIN
        # Location, Retry-After, RateLimit, WWW-Authenticate...: the page may read them all.
        assert response.headers["access-control-expose-headers"] == "*"
        assert "Origin" in response.headers["vary"]
    # The page learns why it was refused.
    assert_problem(refused, 401, "unauthorized")


@pytest.mark.parametrize("origin", NOT_LISTED)
async def test_an_origin_not_listed_gets_no_cors_headers(
    cors_service: Service, origin: str
) -> None:
    tenant = await cors_service.create_tenant(f"t-{uuid4().hex[:12]}")
    async with cors_service.client(tenant) as page, cors_service.client() as anonymous:
        preflight = await anonymous.options(
            "/api/v1/tasks", headers={"Origin": origin, **PREFLIGHT}
        )
        request = await page.get("/api/v1/tasks", headers={"Origin": origin})

    assert _cors_headers(preflight) == {}
    assert _cors_headers(request) == {}
    # Served as if CORS did not exist: a preflight is an unauthenticated request like any other.
    assert_problem(preflight, 401, "unauthorized")
    assert request.status_code == 200


async def test_no_origin_is_listed_by_default(service: Service, tenant: str) -> None:
    assert service.settings.cors_origins == []
    async with service.client(tenant) as page, service.client() as anonymous:
        preflight = await anonymous.options(
            "/api/v1/tasks", headers={"Origin": ORIGIN, **PREFLIGHT}
        )
        request = await page.get("/api/v1/tasks", headers={"Origin": ORIGIN})

    assert _cors_headers(preflight) == {}
    assert _cors_headers(request) == {}


async def test_a_preflight_asking_for_another_header_or_method_is_refused_with_a_problem(
    cors_service: Service,
) -> None:
    async with cors_service.client() as browser:
        header = await browser.options(
            "/api/v1/tasks",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-unheard-of",
            },
        )
        method = await browser.options(
            "/api/v1/tasks",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "TRACE"},
        )

    assert "headers" in assert_problem(header, 400, "bad-request")["detail"]
    assert "method" in assert_problem(method, 400, "bad-request")["detail"]
    # The listed origin may read why.
    assert header.headers["access-control-allow-origin"] == ORIGIN


def test_cors_origins_are_exact_origins_given_comma_separated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMNIFORGE_CORS_ORIGINS", f"{ORIGIN}, http://127.0.0.1:5173")
    assert Settings().cors_origins == [ORIGIN, "http://127.0.0.1:5173"]
    for wrong in ("*", f"{ORIGIN}/", f"{ORIGIN}/console", "console.example.com", "https://*.x"):
        monkeypatch.setenv("OMNIFORGE_CORS_ORIGINS", wrong)
        with pytest.raises(ValidationError, match="is not an origin"):
            Settings()
