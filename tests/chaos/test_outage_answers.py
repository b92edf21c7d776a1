"""While the database is down, every answer is a 503 a client can act on: problem+json with
`Retry-After` and `Connection: close`, never a 500 and never a reset connection; readiness says
unready. Once the database is back, the same requests are served again, nobody restarting
anything. On a real `omniforge serve` and a private Postgres stopped the hard way."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.security import mint_token
from app.storage import Database, head_revision, upgrade_to_head
from tests.cluster import Instance, create_tenant, free_port
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.faults import PrivatePostgres, private_postgres
from tests.service import JWT_SECRET, MODEL, running_service, service_settings

OUTAGE_S = 6.0
START_S = 60.0  # an instance's start-up, imports included, on a busy machine
LOAD_S = 60.0  # the first model call of an instance, waiting for LiteLLM to load
RECOVERY_S = 30.0  # the database back, until each kind of request is served again
PROBLEM = "application/problem+json"
UNAVAILABLE = "https://omniforge.dev/problems/service-unavailable"
# No log line of the instance may say an outage was an unexpected error.
UNEXPECTED = ("Exception in ASGI application", "unhandled error on")


@dataclass
class Store:
    """A private Postgres with a migrated database holding one tenant."""

    postgres: PrivatePostgres
    url: str
    tenant: str


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with private_postgres() as postgres:
        url = await postgres.create_database("omniforge")
        database = Database(url)
        try:
            await upgrade_to_head(database)
        finally:
            await database.dispose()
        yield Store(postgres, url, await create_tenant(url))


@dataclass
class Outage:
    """`store`, and one `omniforge serve` on it that caches tenants for the whole test (a
    JWT's requests reach their routes) and API keys not at all (an API key's requests reach
    the database in the authentication)."""

    postgres: PrivatePostgres
    instance: Instance
    tenant: str

    def token(self) -> str:
        return mint_token(
            JWT_SECRET, tenant_id=self.tenant, subject="root", roles=("tenant_admin",)
        )


@pytest.fixture
async def outage(store: Store, fake_llm: FakeLLMServer, tmp_path: Path) -> AsyncIterator[Outage]:
    settings = service_settings(tmp_path, store.url, fake_llm)
    env = {
        "OMNIFORGE_ENV": "development",
        "OMNIFORGE_DATABASE_URL": store.url,
        "OMNIFORGE_DATA_DIR": str(tmp_path),
        "OMNIFORGE_JWT_SECRET": JWT_SECRET,
        "OMNIFORGE_MODELS_FILE": str(settings.models_file),
        "OMNIFORGE_DEFAULT_MODEL": MODEL,
        "OMNIFORGE_LLM_MAX_ATTEMPTS": "1",
        "OMNIFORGE_TENANT_CACHE_S": "3600",
        "OMNIFORGE_API_KEY_CACHE_S": "0",
    }
    instance = Instance("outage", free_port(), env)
    try:
        async with asyncio.timeout(START_S):
            await instance.start()
        yield Outage(store.postgres, instance, store.tenant)
    finally:
        await instance.kill()


def one_connection(base_url: str) -> httpx.AsyncClient:
    """A client that never retries, on one keep-alive connection at a time: a connection the
    server drops without `Connection: close` fails its next request."""
    return httpx.AsyncClient(
        base_url=base_url,
        transport=httpx.AsyncHTTPTransport(retries=0),
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        timeout=10,
    )


@dataclass(frozen=True)
class Kind:
    """A kind of request, and the status that says it was served."""

    name: str
    method: str
    path: str
    served: int
    token: str | None = None
    json: dict[str, Any] | None = None

    async def send(
        self, client: httpx.AsyncClient, *, read_s: float | None = None
    ) -> httpx.Response:
        """The request; `read_s` waits that long for its answer instead of the client's."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        timeout = httpx.USE_CLIENT_DEFAULT if read_s is None else httpx.Timeout(10, read=read_s)
        try:
            return await client.request(
                self.method, self.path, json=self.json, headers=headers, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise AssertionError(f"{self.name}: the connection failed: {exc!r}") from exc


def kinds(outage: Outage, task_id: str, api_key: str) -> list[Kind]:
    token = outage.token()
    question = [{"role": "user", "content": "What is 6 * 7?"}]
    return [
        Kind("list tasks", "GET", "/api/v1/tasks", 200, token),
        Kind("submit a task", "POST", "/api/v1/tasks", 202, token, {"input": "What is 6 * 7?"}),
        Kind("get a task", "GET", f"/api/v1/tasks/{task_id}", 200, token),
        Kind("list API keys", "GET", "/api/v1/api-keys", 200, token),
        Kind(
            "read the tenant with an API key",
            "GET",
            f"/api/v1/tenants/{outage.tenant}",
            200,
            api_key,
        ),
        Kind("list tasks with an API key", "GET", "/api/v1/tasks", 200, api_key),
        Kind(
            "complete a chat",
            "POST",
            "/v1/chat/completions",
            200,
            token,
            {"model": "agent:default", "messages": question},
        ),
        Kind("readiness", "GET", "/readyz", 200),
    ]


async def served_after_bounded_retries(client: httpx.AsyncClient, kind: Kind) -> httpx.Response:
    """Tries `kind` until it is served (what a client retrying after an outage does), failing
    loudly after RECOVERY_S."""
    answers: list[int] = []
    try:
        async with asyncio.timeout(RECOVERY_S):
            while True:
                response = await kind.send(client)
                if response.status_code == kind.served:
                    return response
                assert response.status_code == 503, f"{kind.name}: {response.text}"
                answers.append(response.status_code)
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(
            f"{kind.name} was not served {RECOVERY_S} s after the outage: {answers[-5:]}"
        ) from None


def assert_unavailable(kind: Kind, response: httpx.Response) -> None:
    what = f"{kind.name} during the outage: {response.status_code} {response.text}"
    assert response.status_code == 503, what
    assert response.headers["content-type"] == PROBLEM, what
    problem = response.json()
    assert problem["type"] == UNAVAILABLE, what
    assert problem["status"] == 503, what
    assert problem["detail"], what
    assert response.headers.get("retry-after") == "1", what
    assert response.headers.get("connection") == "close", what


async def test_a_client_without_retries_gets_only_503s_during_a_database_outage_then_is_served(
    outage: Outage, fake_llm: FakeLLMServer
) -> None:
    fake_llm.always(MODEL, Reply.text("6 * 7 = 42."))
    async with one_connection(outage.instance.base_url) as client:
        token = {"Authorization": f"Bearer {outage.token()}"}
        submitted = await client.post("/api/v1/tasks", json={"input": "hi"}, headers=token)
        assert submitted.status_code == 202, submitted.text
        created = await client.post(
            "/api/v1/api-keys", json={"name": "ci", "roles": ["tenant_admin"]}, headers=token
        )
        assert created.status_code == 201, created.text
        requests = kinds(outage, submitted.json()["task_id"], created.json()["secret"])
        for kind in requests:
            # Before the outage. A just-started instance loads LiteLLM after it is ready
            # (seconds of CPU, more beside the suite's other workers): the first request that
            # runs a model call waits for it.
            answer = await kind.send(client, read_s=LOAD_S)
            assert answer.status_code == kind.served, kind.name

        await outage.postgres.stop()
        answered: list[tuple[Kind, httpx.Response]] = []
        loop = asyncio.get_running_loop()
        over = loop.time() + OUTAGE_S
        try:
            while loop.time() < over:
                for kind in requests:
                    answered.append((kind, await kind.send(client)))
        finally:
            await outage.postgres.start()

        for kind, response in answered:
            assert_unavailable(kind, response)
        assert {kind.name for kind, _ in answered} == {kind.name for kind in requests}
        completion = next(r for k, r in answered if k.path == "/v1/chat/completions").json()
        assert completion["error"]["code"] == "service-unavailable"
        readiness = next(r for k, r in answered if k.path == "/readyz").json()
        assert readiness["detail"].startswith("not ready: the database is unreachable")

        for kind in requests:
            await served_after_bounded_retries(client, kind)
    assert not [line for line in outage.instance.output if any(m in line for m in UNEXPECTED)]
    assert any(
        "answered 503: the database is unavailable" in line for line in outage.instance.output
    )


async def test_readiness_says_unready_while_the_database_is_down_and_ready_again_by_itself(
    store: Store, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    readiness = Kind("readiness", "GET", "/readyz", 200)
    settings = service_settings(tmp_path, store.url, fake_llm)
    async with (
        running_service(settings, fake_llm) as service,
        one_connection(service.base_url) as client,
    ):
        before = await client.get("/readyz")
        await store.postgres.stop()
        try:
            during = await client.get("/readyz")
        finally:
            await store.postgres.start()
        after = await served_after_bounded_retries(client, readiness)

    assert before.json() == {"status": "ready", "schema_revision": head_revision()}
    assert_unavailable(readiness, during)
    assert during.json()["detail"].startswith("not ready: the database is unreachable")
    assert after.json() == {"status": "ready", "schema_revision": head_revision()}
