"""Shared fixtures: the scripted fake LLM server, a database per test run on each backend
(SQLite and Postgres, built by the migrations), and the service running on it."""

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.storage import Database, upgrade_to_head
from tests.fakes.openai_server import FakeLLMServer
from tests.service import Service, checked, running_service, service_settings

POSTGRES_ADMIN_URL = os.environ.get(
    "OMNIFORGE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", "postgres"]


def pytest_configure(config: pytest.Config) -> None:
    # Model lists in tests reference their key as `os.environ/FAKE_LLM_API_KEY`, like real ones.
    os.environ.setdefault("FAKE_LLM_API_KEY", "fake-key")


# The chaos scenarios mostly wait (outages, drains): they go first, the longest first, so
# that the other workers run the rest of the suite meanwhile instead of after them; so do the
# other tests of a minute or more (the fuzz, one per shard), which would otherwise end last.
_FIRST = (
    "test_store_outages.py",
    "test_cluster_streams.py",
    "test_fuzz.py",
    "test_redis_restart.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.path
        if path.name in _FIRST:
            return (0, _FIRST.index(path.name))
        return (1, 0) if path.parent.name == "chaos" else (2, 0)

    items.sort(key=order)


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLMServer]:
    """A fake OpenAI-compatible server on 127.0.0.1; unscripted or unused replies fail."""
    async with FakeLLMServer() as server:
        yield server
        server.verify()


async def _admin_connection() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"Postgres is unreachable at {POSTGRES_ADMIN_URL} ({exc}). The suite runs on "
            "Postgres and SQLite; scripts/test starts a throwaway Postgres when none is "
            "running, or set OMNIFORGE_TEST_POSTGRES_URL.",
            pytrace=False,
        )


def _postgres_url(name: str) -> str:
    address = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+asyncpg", database=name)
    return address.render_as_string(hide_password=False)


async def _admin_execute(statement: str) -> None:
    admin = await _admin_connection()
    try:
        await admin.execute(statement)
    finally:
        await admin.close()


# Each worker builds one database per backend with `alembic upgrade head`, once; every fresh
# database is a copy of it (`CREATE DATABASE … TEMPLATE` on Postgres, a copy of the file on
# SQLite): the schema the migrations build, without running them again for each test.
_templates: dict[str, Path | str] = {}


async def _migrated_template(backend: str) -> Path | str:
    template = _templates.get(backend)
    if template is not None:
        return template
    name = f"omniforge_template_{uuid4().hex[:12]}"
    if backend == "sqlite":
        template = Path(tempfile.mkdtemp(prefix="omniforge-template-")) / f"{name}.db"
        url = f"sqlite+aiosqlite:///{template}"
    else:
        await _admin_execute(f'CREATE DATABASE "{name}"')
        template, url = name, _postgres_url(name)
    database = Database(url)
    try:
        await upgrade_to_head(database)
    finally:
        await database.dispose()  # a template takes no connection while it is copied
    _templates[backend] = template
    return template


def pytest_sessionfinish() -> None:
    """Drops this worker's template databases."""
    for backend, template in _templates.items():
        if backend == "sqlite":
            shutil.rmtree(Path(template).parent, ignore_errors=True)
        else:
            asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)'))
    _templates.clear()


@asynccontextmanager
async def fresh_database(backend: str, directory: Path) -> AsyncIterator[str]:
    """A new database on `backend`, a copy of one built by `alembic upgrade head`; dropped
    after."""
    name = f"omniforge_test_{uuid4().hex[:12]}"
    template = await _migrated_template(backend)
    if backend == "sqlite":
        path = directory / f"{name}.db"
        # Closed after its migration, the template has no write-ahead log left to copy.
        shutil.copyfile(template, path)
        url = f"sqlite+aiosqlite:///{path}"
    else:
        await _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        url = _postgres_url(name)
    yield url
    if backend == "postgres":
        await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", params=BACKENDS)
async def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A fresh database for this test run, shared by its tests (and the service on it)."""
    async with fresh_database(request.param, tmp_path_factory.mktemp("sqlite")) as url:
        yield url


@pytest.fixture(params=BACKENDS)
async def own_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database for one test alone: no other test's service claims its queued tasks, and
    instances the test starts see only its own."""
    async with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
async def database(own_database_url: str) -> AsyncIterator[Database]:
    """An engine on a database of this test's own (each backend); a module may define its own."""
    database = Database(own_database_url)
    yield database
    await database.dispose()


@pytest.fixture(scope="session")
async def shared_fake_llm() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="session")
async def running(
    database_url: str, shared_fake_llm: FakeLLMServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Service]:
    settings = service_settings(tmp_path_factory.mktemp("service"), database_url, shared_fake_llm)
    async with running_service(settings, shared_fake_llm) as service:
        yield service


@pytest.fixture
async def service(running: Service) -> AsyncIterator[Service]:
    """The service of this backend, `checked` after each test."""
    async with checked(running) as service:
        yield service


@pytest.fixture
async def tenant(running: Service) -> str:
    """A tenant of its own for each test, so tests never see each other's data."""
    return await running.create_tenant(f"t-{uuid4().hex[:12]}")


@pytest.fixture
async def other_tenant(running: Service) -> str:
    return await running.create_tenant(f"o-{uuid4().hex[:12]}")


@pytest.fixture
def service_dir(tmp_path: Path) -> Path:
    return tmp_path
