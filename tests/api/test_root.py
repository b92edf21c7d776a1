"""The service's address itself: a browser is sent on to the console, an API client asking for
JSON gets an index of where things are; neither needs a token, and neither is an API route
of the OpenAPI document."""

import importlib.metadata

import pytest

from tests.service import Service

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", [BROWSER_ACCEPT, "*/*"])
async def test_a_browser_opening_the_address_is_sent_to_the_console(
    service: Service, accept: str
) -> None:
    async with service.client() as browser:
        response = await browser.get("/", headers={"Accept": accept})
        landed = await browser.get(response.headers["location"])

    assert response.status_code == 307
    assert response.headers["location"] == "/console"
    assert "accept" in response.headers["vary"].lower()
    assert landed.status_code == 200
    assert '<div id="app">' in landed.text


async def test_an_api_client_asking_for_json_gets_an_index(service: Service) -> None:
    async with service.client() as client:
        response = await client.get("/", headers={"Accept": "application/json"})
        followed = [await client.get(url) for url in response.json()["links"].values()]

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert "accept" in response.headers["vary"].lower()
    assert response.json() == {
        "name": "OmniForge",
        "version": importlib.metadata.version("omniforge"),
        "links": {
            "docs": "/docs",
            "openapi": "/openapi.json",
            "console": "/console",
            "healthz": "/healthz",
        },
    }
    assert [r.status_code for r in followed] == [200, 200, 200, 200]


async def test_the_root_is_not_in_the_openapi_document(service: Service) -> None:
    async with service.client() as client:
        document = (await client.get("/openapi.json")).json()

    assert "/" not in document["paths"]
