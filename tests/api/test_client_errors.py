"""A tenant whose requests keep failing (4xx) is refused after its allowance: 429
`rate-limited` naming `client_errors_per_minute`, with `Retry-After`; valid requests of the
same tenant are refused too until the window frees up, and another tenant is not throttled."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.helpers import assert_problem
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, running_service, service_settings

ALLOWANCE = 5


@pytest.fixture
async def limited(
    service_dir: Path, database_url: str, fake_llm: FakeLLMServer
) -> AsyncIterator[Service]:
    settings = service_settings(
        service_dir, database_url, fake_llm, client_errors_per_minute=ALLOWANCE
    )
    async with running_service(settings, fake_llm) as service:
        yield service


async def test_a_flood_of_invalid_requests_is_refused_for_its_tenant_alone(
    limited: Service,
) -> None:
    flooder = await limited.create_tenant("flooder")
    bystander = await limited.create_tenant("bystander")
    async with limited.client(flooder) as client, limited.client(bystander) as other:
        invalid = [
            (await client.post("/api/v1/tasks", json={"input": ""})).status_code
            for _ in range(ALLOWANCE + 3)
        ]
        refused = await client.post("/api/v1/tasks", json={"input": ""})
        valid_but_refused = await client.get("/api/v1/agents")
        others_invalid = (await other.post("/api/v1/tasks", json={"input": ""})).status_code
        others_valid = await other.get("/api/v1/agents")

    # The allowance passes (the window takes one more 4xx), everything after is refused.
    assert invalid[:ALLOWANCE] == [422] * ALLOWANCE
    assert set(invalid[ALLOWANCE + 1 :]) == {429}
    body = assert_problem(refused, 429, "rate-limited")
    assert body["limit"] == "client_errors_per_minute"
    assert 0 < body["retry_after_s"] <= 60
    assert int(refused.headers["Retry-After"]) >= 1
    assert_problem(valid_but_refused, 429, "rate-limited")
    assert others_invalid == 422
    assert others_valid.status_code == 200
