"""Liveness and readiness: no token needed; readiness means a reachable, migrated database."""

from pathlib import Path

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
