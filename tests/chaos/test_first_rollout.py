"""The first rollout of a multi-replica deployment: instances started at the same moment on an
empty database take turns migrating it (a database lock), then all come up and serve."""

import asyncio
from pathlib import Path

import httpx

from app.security import mint_token
from app.storage import head_revision
from tests.cluster import Instance, create_tenant, free_port
from tests.fakes.openai_server import FakeLLMServer
from tests.faults import private_postgres
from tests.service import JWT_SECRET, MODEL, service_settings

INSTANCES = 3
START_S = 90.0  # three start-ups at once, imports and migrations included, on a busy machine


async def test_three_instances_started_at_once_on_an_empty_database_all_come_up_and_serve(
    fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    async with private_postgres() as postgres:
        url = await postgres.create_database("omniforge")  # empty: no `alembic_version` yet
        settings = service_settings(tmp_path, url, fake_llm)
        env = {
            "OMNIFORGE_ENV": "development",
            "OMNIFORGE_DATABASE_URL": url,
            "OMNIFORGE_DATA_DIR": str(tmp_path),
            "OMNIFORGE_JWT_SECRET": JWT_SECRET,
            "OMNIFORGE_MODELS_FILE": str(settings.models_file),
            "OMNIFORGE_DEFAULT_MODEL": MODEL,
        }
        instances = [Instance(f"replica-{n}", free_port(), env) for n in range(INSTANCES)]
        try:
            try:
                async with asyncio.timeout(START_S), asyncio.TaskGroup() as starting:
                    for instance in instances:
                        starting.create_task(instance.start())
            except TimeoutError:
                logs = "\n".join(f"--- {i.name}:\n{i.log}" for i in instances)
                raise AssertionError(f"not all started within {START_S} s:\n{logs}") from None
            # A tenant, once the schema exists, and a member's token of it.
            tenant = await create_tenant(url)
            token = mint_token(JWT_SECRET, tenant_id=tenant, subject="alice", roles=("member",))
            for instance in instances:
                async with instance.client(token) as client:
                    ready = await client.get("/readyz")
                    listed = await client.get("/api/v1/tasks")
                assert_serves(instance, ready, listed)
        finally:
            for instance in instances:
                await instance.kill()


def assert_serves(instance: Instance, ready: httpx.Response, listed: httpx.Response) -> None:
    assert ready.status_code == 200, f"{instance.name}: {ready.text}\n{instance.log}"
    assert ready.json() == {"status": "ready", "schema_revision": head_revision()}
    assert listed.status_code == 200, f"{instance.name}: {listed.text}\n{instance.log}"
    assert listed.json()["items"] == []
