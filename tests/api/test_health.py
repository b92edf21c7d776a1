"""Liveness and readiness: no token needed; readiness means a reachable, migrated database."""

import asyncio
import re
from pathlib import Path

import httpx

from app.api.serving import KEEP_ALIVE_S
from app.storage import head_revision
from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings


async def test_healthz_answers_ok_without_a_token(service: Service) -> None:
    async with service.client() as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_answers_ready_at_the_head_revision_without_a_token(service: Service) -> None:
    async with service.client() as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "schema_revision": head_revision()}


async def test_readyz_is_unavailable_on_a_database_that_is_not_migrated(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    settings = service_settings(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}", fake_llm)
    async with running_service(settings, fake_llm) as service, service.client() as client:
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")

    body = assert_problem(ready, 503, "service-unavailable")
    assert "omniforge migrate" in body["detail"]
    assert alive.status_code == 200  # alive, just not ready


async def test_an_idle_connection_outlives_the_clients_pools_and_serves_again(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    # Idle past httpx's pool expiry (5 s, as uvicorn's own keep-alive was): a client that
    # reuses it then must not meet a connection the server is closing at that moment.
    settings = service_settings(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'idle.db'}", fake_llm)
    idle_s = httpx.Limits().keepalive_expiry
    assert idle_s is not None
    assert idle_s < KEEP_ALIVE_S
    async with running_service(settings, fake_llm) as service:
        url = httpx.URL(service.base_url)
        reader, writer = await asyncio.open_connection(url.host, url.port)
        request = f"GET /healthz HTTP/1.1\r\nHost: {url.host}\r\n\r\n".encode()
        try:
            answers = []
            for pause_s in (0.0, idle_s + 1):
                await asyncio.sleep(pause_s)  # the connection left idle: the scenario itself
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
                assert length is not None
                body = await reader.readexactly(int(length[1]))
                answers.append((head.split(b"\r\n")[0], body))
        finally:
            writer.close()
    assert answers == [(b"HTTP/1.1 200 OK", b'{"status":"ok"}')] * 2
