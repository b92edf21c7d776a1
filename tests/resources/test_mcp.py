"""A tenant's MCP servers as its runs get them, on both databases: tools compiled from the
stored rows and kept for a short time, servers reached through the tenant's allow-list with
their headers' secrets, their status stored when it changes, and sessions renewed when a
secret changes or closed when a server goes."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from sqlalchemy import update

from app.chain import ReasoningChain
from app.resources.mcp_servers import McpServers
from app.resources.mcp_servers.store import McpServerRecord, McpServerRepository
from app.resources.secrets import SecretVault
from app.resources.secrets.store import SecretRepository
from app.security.secrets import KeyRing
from app.storage import Database
from app.storage.tables import tenants
from app.storage.tenants import TenantRepository
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from app.tools.services import NetworkPolicy
from tests.fakes.mcp_server import TOKEN, FakeMcpServer

KEY = bytes(range(32))
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
HEADERS = {"Authorization": {"secret": "MCP_TOKEN", "prefix": "Bearer "}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


@pytest.fixture
async def tenant(database: Database) -> str:
    """A tenant whose allow-list admits 127.0.0.1, where the test's MCP server listens."""
    tenant_id = f"t-{uuid4().hex[:12]}"
    async with database.transaction() as connection:
        await TenantRepository(connection).create(tenant_id, "MCP", at=T0)
        await connection.execute(
            update(tenants)
            .where(tenants.c.id == tenant_id)
            .values(network_allow={"allow": [], "platform_allow": ["127.0.0.1/32"]})
        )
    return tenant_id


@pytest.fixture
async def vault(database: Database, tenant: str) -> SecretVault:
    vault = SecretVault(database, KeyRing([KEY]), ttl_s=60)
    await set_secret(vault, database, tenant, TOKEN)
    return vault


@pytest.fixture
async def mcp_server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


@pytest.fixture
async def servers(database: Database, vault: SecretVault) -> AsyncIterator[McpServers]:
    servers = McpServers(database, secrets=vault, network=NetworkPolicy(), timeout_s=10)
    yield servers
    await servers.aclose()


async def set_secret(vault: SecretVault, database: Database, tenant: str, value: str) -> None:
    sealed = vault.seal(tenant, "MCP_TOKEN", value)
    async with database.transaction() as connection:
        await SecretRepository(connection, tenant).put(
            "MCP_TOKEN", key_id=sealed.key_id, sealed=sealed.text, by="alice", at=T0
        )
    vault.changed(tenant, value)


async def store(database: Database, tenant: str, url: str, **fields: Any) -> McpServerRecord:
    values: dict[str, Any] = {
        "name": "fake",
        "url": url,
        "headers": HEADERS,
        "allowed_tools": None,
        "tool_roles": {},
        **fields,
    }
    async with database.transaction() as connection:
        return await McpServerRepository(connection, tenant).create(**values, by="alice", at=T0)


async def stored(database: Database, tenant: str, server_id: UUID) -> McpServerRecord:
    async with database.read() as connection:
        record = await McpServerRepository(connection, tenant).get(server_id)
    assert record is not None
    return record


async def call(servers: McpServers, tenant: str, name: str, **arguments: Any) -> ToolResult:
    executor = ToolExecutor(ToolRegistry())
    chain = ReasoningChain(task_id="t", agent_id="a")
    registry = ToolRegistry().extended(await servers.tools_for(tenant))
    context = ToolCallContext(task_id="t", agent_id="a", chain_id=chain.id, tools=registry)
    return await executor.execute(chain, context, name, arguments)


async def test_discovery_stores_what_the_server_offers(
    database: Database, tenant: str, servers: McpServers, mcp_server: FakeMcpServer
) -> None:
    record = await store(database, tenant, mcp_server.url)

    refreshed = await servers.refresh(tenant, record.id)

    assert refreshed is not None
    assert refreshed.status == "ok"
    assert [document["remote"] for document in refreshed.tools] == ["add", "whoami", "slow_count"]
    assert [tool.definition.name for tool in await servers.tools_for(tenant)] == [
        "fake__add",
        "fake__whoami",
        "fake__slow_count",
    ]
    assert await servers.refresh(f"o-{uuid4().hex[:8]}", record.id) is None  # not theirs


async def test_runs_get_the_tools_from_a_short_cache(
    database: Database, tenant: str, vault: SecretVault, mcp_server: FakeMcpServer
) -> None:
    clock = Clock()
    here = McpServers(database, secrets=vault, network=NetworkPolicy(), timeout_s=10, clock=clock)
    elsewhere = McpServers(database, secrets=vault, network=NetworkPolicy(), timeout_s=10)
    try:
        first = await store(database, tenant, mcp_server.url)
        await here.refresh(tenant, first.id)
        cached = await here.tools_for(tenant)
        second = await store(database, tenant, mcp_server.url, name="again")
        await elsewhere.refresh(tenant, second.id)  # another instance registers one
        still = await here.tools_for(tenant)
        clock.now += 5.01
        later = await here.tools_for(tenant)
    finally:
        await here.aclose()
        await elsewhere.aclose()

    assert still is cached
    assert [tool.definition.name for tool in later] == [
        *(f"again__{name}" for name in ("add", "whoami", "slow_count")),
        *(tool.definition.name for tool in cached),
    ]


async def test_the_tenants_allow_list_and_its_secret_reach_the_server(
    database: Database, tenant: str, servers: McpServers, mcp_server: FakeMcpServer
) -> None:
    record = await store(database, tenant, mcp_server.url)
    await servers.refresh(tenant, record.id)

    result = await call(servers, tenant, "fake__whoami")

    assert result.success, result.error
    assert mcp_server.calls_of("whoami")[0].authorization == f"Bearer {TOKEN}"
    async with database.transaction() as connection:
        await connection.execute(
            update(tenants).where(tenants.c.id == tenant).values(network_allow=None)
        )
    refused = await servers.refresh(tenant, record.id)
    assert refused is not None
    assert refused.status == "error"
    assert refused.status_detail is not None
    assert refused.status_detail.startswith(f"refused {mcp_server.url}: 127.0.0.1 is ")


async def test_the_status_is_stored_when_it_changes(
    database: Database, tenant: str, servers: McpServers, mcp_server: FakeMcpServer
) -> None:
    record = await store(database, tenant, mcp_server.url)
    await servers.refresh(tenant, record.id)
    checked = (await stored(database, tenant, record.id)).checked_at

    await call(servers, tenant, "fake__add", a=1, b=2)
    unchanged = await stored(database, tenant, record.id)
    await mcp_server.stop()
    failed = await call(servers, tenant, "fake__add", a=1, b=2)
    down = await stored(database, tenant, record.id)
    await mcp_server.start()
    await call(servers, tenant, "fake__add", a=1, b=2)
    back = await stored(database, tenant, record.id)

    assert unchanged.checked_at == checked  # a success after a success writes nothing
    assert down.status == "error"
    assert down.status_detail == failed.error
    assert back.status == "ok"
    assert back.status_detail is None


async def test_a_changed_secret_opens_a_new_session_with_it(
    database: Database,
    tenant: str,
    vault: SecretVault,
    servers: McpServers,
    mcp_server: FakeMcpServer,
) -> None:
    record = await store(database, tenant, mcp_server.url)
    await servers.refresh(tenant, record.id)
    assert (await call(servers, tenant, "fake__whoami")).success

    await set_secret(vault, database, tenant, "rotated-" + "z" * 20)
    servers.secrets_changed(tenant)
    refused = await call(servers, tenant, "fake__whoami")

    assert not refused.success
    assert mcp_server.calls_of("whoami")[-1].authorization == "Bearer rotated-" + "z" * 20
    assert mcp_server.initializations == 2


async def test_a_removed_server_closes_its_session(
    database: Database, tenant: str, servers: McpServers, mcp_server: FakeMcpServer
) -> None:
    record = await store(database, tenant, mcp_server.url)
    await servers.refresh(tenant, record.id)
    assert mcp_server.open_sessions == 1

    async with database.transaction() as connection:
        await McpServerRepository(connection, tenant).delete(record.id)
    servers.removed(tenant, record.id)
    await servers.settled()

    assert mcp_server.open_sessions == 0
    assert await servers.tools_for(tenant) == []
