"""The console's page as the service serves it: one shell for every console path, under a
Content-Security-Policy that lets it reach nothing but the service (and the identity
provider's token endpoint when one is configured); the sign-in configuration; and a plain
503 saying how to build it when it is not built. (The console itself: tests/browser/.)"""

from pathlib import Path

import pytest

from app.api import console
from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings


@pytest.mark.parametrize("path", ["/console", "/console/", "/console/tasks/abc", "/console/costs"])
async def test_every_console_path_serves_the_shell_under_a_strict_policy(
    service: Service, path: str
) -> None:
    async with service.client() as browser:
        response = await browser.get(path)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<div id="app">' in response.text
    assert "/static/console/console-" in response.text  # the built, content-named script
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self';" in policy
    assert "style-src 'self';" in policy  # no inline styles either
    assert "connect-src 'self';" in policy  # no identity provider configured
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_the_shells_assets_are_served_by_the_service(service: Service) -> None:
    async with service.client() as browser:
        shell = (await browser.get("/console/")).text
        script = shell.split('src="')[1].split('"')[0]
        style = shell.split('rel="stylesheet" href="')[1].split('"')[0]
        loaded = [await browser.get(url) for url in (script, style)]

    assert [r.status_code for r in loaded] == [200, 200]
    assert "javascript" in loaded[0].headers["content-type"]
    assert loaded[1].headers["content-type"].startswith("text/css")


async def test_without_an_identity_provider_the_console_signs_in_with_keys_only(
    service: Service,
) -> None:
    async with service.client() as browser:
        config = (await browser.get("/console/config.json")).json()

    assert config["oidc"] is None


async def test_with_an_identity_provider_the_console_offers_it_and_may_reach_its_token_endpoint(
    database_url: str, fake_llm: FakeLLMServer, service_dir: Path
) -> None:
    settings = service_settings(
        service_dir,
        database_url,
        fake_llm,
        console_oidc_client_id="omniforge-console",
        console_oidc_authorization_url="https://id.example.com/auth",
        console_oidc_token_url="https://id.example.com:8443/token",
    )
    async with running_service(settings, fake_llm) as service, service.client() as browser:
        config = (await browser.get("/console/config.json")).json()
        policy = (await browser.get("/console/")).headers["content-security-policy"]

    assert config["oidc"] == {
        "client_id": "omniforge-console",
        "authorization_url": "https://id.example.com/auth",
        "token_url": "https://id.example.com:8443/token",
        "scope": "openid profile",
    }
    assert "connect-src 'self' https://id.example.com:8443;" in policy


async def test_an_unbuilt_console_answers_503_saying_how_to_build_it(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "_SHELL", tmp_path / "missing" / "index.html")
    async with service.client() as browser:
        response = await browser.get("/console/tasks")

    problem = assert_problem(response, 503, "service-unavailable")
    assert "npm ci && npm run build" in problem["detail"]


async def test_scripts_and_styles_go_gzipped_to_browsers_that_take_it_and_are_cached_for_good(
    service: Service,
) -> None:
    async with service.client() as browser:
        shell = (await browser.get("/console/")).text
        script = shell.split('src="')[1].split('"')[0]
        zipped = await browser.get(script, headers={"Accept-Encoding": "gzip"})
        plain = await browser.get(script, headers={"Accept-Encoding": "identity"})
        again = await browser.get(
            script, headers={"Accept-Encoding": "gzip", "If-None-Match": zipped.headers["etag"]}
        )

    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["content-type"] == "text/javascript; charset=utf-8"
    assert zipped.content == plain.content  # httpx decompressed it: the same script
    assert int(zipped.headers["content-length"]) < len(plain.content) / 2
    assert "content-encoding" not in plain.headers
    assert zipped.headers["vary"] == plain.headers["vary"] == "Accept-Encoding"
    assert zipped.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert again.status_code == 304
