"""A tenant's MCP servers and the tools they offer: their sessions kept open and reused, their
tools discovered and stored on their rows (so that every instance offers the same), their
status recorded when it changes."""

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from app.chain.models import utc_now
from app.resources.mcp_servers.store import McpServerRecord, McpServerRepository, McpStatus
from app.storage import Database
from app.storage.tenants import network_allow
from app.tools.errors import ToolError
from app.tools.mcp import McpToolSpec, discover, named
from app.tools.registry import RegisteredTool
from app.tools.services import NetworkPolicy, SecretUse, resolve_headers

if TYPE_CHECKING:
    # The `mcp` SDK under them is imported when a server is first compiled, not at start-up.
    from app.tools.mcp.session import HeaderSource, Health, McpConnection

logger = logging.getLogger(__name__)

# How long an instance offers a tenant's servers' tools as it last read them; changes made
# through this instance apply at once, others' within this time.
CACHE_TTL_S = 5.0


class SecretValues(Protocol):
    """A tenant's secrets by name, for a use: `ToolError` with `secret_not_found` for an
    unknown one, `secret_out_of_scope` for one its `usable_by` does not allow the use of.
    `redactor` masks them (every form of every value) in what is written of the tenant."""

    async def value(self, tenant_id: str, name: str, use: SecretUse | None = None) -> str: ...

    async def redactor(self, tenant_id: str) -> Callable[[str], str]: ...


@dataclass(frozen=True, slots=True)
class _Server:
    """One stored server as runs use it: its session and its compiled tools."""

    record: McpServerRecord
    network: NetworkPolicy
    connection: "McpConnection"
    tools: tuple[RegisteredTool, ...]

    def same_config(self, record: McpServerRecord, network: NetworkPolicy) -> bool:
        """Whether `record` is reached as this one is (the same session serves it)."""
        mine = self.record
        return (mine.name, mine.url, mine.headers) == (
            record.name,
            record.url,
            record.headers,
        ) and self.network == network

    def same_tools(self, record: McpServerRecord) -> bool:
        mine = self.record
        return (mine.tools, mine.allowed_tools, mine.tool_roles) == (
            record.tools,
            record.allowed_tools,
            record.tool_roles,
        )


@dataclass(frozen=True, slots=True)
class _Tenant:
    loaded_at: float
    servers: dict[UUID, _Server]
    tools: list[RegisteredTool]


class McpServers:
    """Every tenant's MCP servers. `tools_for` is what runs get (from a short cache);
    `refresh` asks a server for its tools now; `changed`/`removed` tell it of a change made
    through the API. Headers' `{"secret": NAME}` are resolved through `secrets` when a
    session opens; servers are reached only through the SSRF guard, with `network` (the
    operator's allow-list) and the tenant's own allow-list admitting private addresses."""

    def __init__(
        self,
        database: Database,
        *,
        secrets: SecretValues | None,
        network: NetworkPolicy,
        timeout_s: float,
        cache_ttl_s: float = CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._secrets = secrets
        self._network = network
        self._timeout_s = timeout_s
        self._ttl_s = cache_ttl_s
        self._clock = clock
        self._tenants: dict[str, _Tenant] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Servers whose tools are being listed again after they said they changed, and those
        # that said so again meanwhile.
        self._rediscovering: set[UUID] = set()
        self._rediscover_again: set[UUID] = set()

    async def tools_for(self, tenant_id: str) -> list[RegisteredTool]:
        """The tools of the tenant's servers, as last discovered and filtered by each
        server's `allowed_tools`."""
        entry = self._tenants.get(tenant_id)
        if entry is not None and self._clock() - entry.loaded_at < self._ttl_s:
            return entry.tools
        return (await self._load(tenant_id, after=entry)).tools

    async def refresh(self, tenant_id: str, server_id: UUID) -> McpServerRecord | None:
        """Opens a new session to the server (its headers' secrets resolved anew), asks it
        for its tools and stores what it offered (or why it did not answer); None if the
        server is not the tenant's."""
        entry = await self._load(tenant_id, after=self._tenants.get(tenant_id), force=True)
        server = entry.servers.get(server_id)
        if server is None:
            return None
        await server.connection.reopen()
        return await self._discover(tenant_id, server)

    def changed(self, tenant_id: str) -> None:
        """The tenant's servers changed: its next `tools_for` reads them again."""
        entry = self._tenants.get(tenant_id)
        if entry is not None:
            self._tenants[tenant_id] = _Tenant(float("-inf"), entry.servers, entry.tools)

    def secrets_changed(self, tenant_id: str) -> None:
        """A secret of the tenant was set or deleted: its servers' next calls open new
        sessions, with their headers resolved anew (on this instance; elsewhere a server
        answering 401 or 403, or a refresh, does it)."""
        entry = self._tenants.get(tenant_id)
        for server in [] if entry is None else entry.servers.values():
            server.connection.expire()

    def removed(self, tenant_id: str, server_id: UUID) -> None:
        """A server was deleted: its session is closed."""
        entry = self._tenants.get(tenant_id)
        server = None if entry is None else entry.servers.get(server_id)
        if server is not None:
            self._spawn(server.connection.aclose())
        self.changed(tenant_id)

    async def settled(self) -> None:
        """Until the upkeep under way is done: discoveries a server's list change started,
        sessions being closed."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        entries, self._tenants = list(self._tenants.values()), {}
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(
            *self._tasks,
            *(server.connection.aclose() for e in entries for server in e.servers.values()),
            return_exceptions=True,
        )

    async def _load(self, tenant_id: str, *, after: _Tenant | None, force: bool = False) -> _Tenant:
        lock = self._locks.setdefault(tenant_id, asyncio.Lock())
        async with lock:
            entry = self._tenants.get(tenant_id)
            fresh = entry is not None and self._clock() - entry.loaded_at < self._ttl_s
            if not force and fresh and entry is not after:
                assert entry is not None
                return entry  # another caller loaded it meanwhile
            async with self._database.read() as connection:
                repository = McpServerRepository(connection, tenant_id)
                records = await repository.all()
                allowed = await network_allow(connection, tenant_id)
            network = self._network.merged(NetworkPolicy.of(allowed)) if allowed else self._network
            before = {} if entry is None else entry.servers
            servers = {
                record.id: self._compiled(record, network, before.get(record.id))
                for record in records
            }
            for server_id, server in before.items():
                current = servers.get(server_id)
                if current is None or current.connection is not server.connection:
                    self._spawn(server.connection.aclose())
            tools = [tool for server in servers.values() for tool in server.tools]
            entry = _Tenant(self._clock(), servers, tools)
            self._tenants[tenant_id] = entry
            return entry

    def _compiled(
        self, record: McpServerRecord, network: NetworkPolicy, before: _Server | None
    ) -> _Server:
        if before is not None and before.same_config(record, network):
            if before.same_tools(record):
                return _Server(record, network, before.connection, before.tools)
            connection = before.connection
        else:
            from app.tools.mcp import McpConnection

            connection = McpConnection(
                record.url,
                server=record.name,
                headers=self._header_source(record),
                network=network,
                timeout_s=self._timeout_s,
                on_tools_changed=lambda: self._tools_changed(record.tenant_id, record.id),
                on_health=lambda health: self._record_health(record.tenant_id, record.id, health),
                health=_health_of(record),
            )
        return _Server(record, network, connection, self._tools(record, connection))

    def _tools(
        self, record: McpServerRecord, connection: "McpConnection"
    ) -> tuple[RegisteredTool, ...]:
        from app.tools.mcp import McpTool

        allowed = None if record.allowed_tools is None else set(record.allowed_tools)
        tools: list[RegisteredTool] = []
        for name, spec in offered(record)[0]:
            if allowed is not None and spec.remote not in allowed:
                continue
            roles = tuple(record.tool_roles.get(spec.remote, ()))
            tool = McpTool(
                connection,
                name,
                spec,
                required_roles=roles,
                timeout_s=self._timeout_s,
                secrets=secret_names(record.headers),
            )
            tools.append(RegisteredTool.of(tool))
        return tuple(tools)

    def _header_source(self, record: McpServerRecord) -> "HeaderSource":
        secrets, tenant_id, headers = self._secrets, record.tenant_id, dict(record.headers)
        # The session is the server's, shared by the tenant's runs: its secrets are checked
        # here as sent by the server, and each run's call as that run's use (`McpTool`).
        use = SecretUse("mcp_server", record.name)

        async def resolve() -> dict[str, str]:
            lookup = None if secrets is None else partial(secrets.value, tenant_id, use=use)
            return await resolve_headers(headers, lookup)

        return resolve

    async def _redacted(self, tenant_id: str, detail: str | None) -> str | None:
        """A status detail as stored: whatever the server said, without the tenant's secrets
        (which a failing server may echo, in any case or encoded)."""
        if detail is None or self._secrets is None:
            return detail
        return (await self._secrets.redactor(tenant_id))(detail)

    async def _redacted_tools(
        self, tenant_id: str, documents: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Discovered tools as stored: what the server wrote of each (its description, its
        parameters' texts, why it was skipped) without the tenant's secrets; names as given."""
        if self._secrets is None:
            return documents
        redact = await self._secrets.redactor(tenant_id)
        return [
            {
                key: value if key == "remote" else _redacted(value, redact)
                for key, value in doc.items()
            }
            for doc in documents
        ]

    async def _discover(self, tenant_id: str, server: _Server) -> McpServerRecord | None:
        record = server.record
        documents: list[dict[str, Any]] | None = None
        status: McpStatus = "error"
        detail: str | None
        try:
            listed = await server.connection.list_tools()
        except ToolError as exc:
            detail = exc.message
        else:
            found = discover(record.name, listed)
            documents = [spec.document() for spec in found.tools] + [
                {"remote": remote, "skipped": reason} for remote, reason in found.skipped
            ]
            status = "ok"
            detail = notes(record.model_copy(update={"tools": documents}))
        detail = await self._redacted(tenant_id, detail)
        if documents is not None:
            documents = await self._redacted_tools(tenant_id, documents)
        async with self._database.transaction() as connection:
            repository = McpServerRepository(connection, tenant_id)
            await repository.record_discovery(
                record.id, tools=documents, status=status, detail=detail, at=utc_now()
            )
            stored = await repository.get(record.id)
        self.changed(tenant_id)
        return stored

    def _tools_changed(self, tenant_id: str, server_id: UUID) -> None:
        if server_id in self._rediscovering:  # the discovery under way asks once more
            self._rediscover_again.add(server_id)
            return
        self._rediscovering.add(server_id)
        self._spawn(self._rediscover(tenant_id, server_id))

    async def _rediscover(self, tenant_id: str, server_id: UUID) -> None:
        try:
            while True:
                self._rediscover_again.discard(server_id)
                entry = self._tenants.get(tenant_id)
                server = None if entry is None else entry.servers.get(server_id)
                if server is not None:
                    await self._discover(tenant_id, server)
                if server_id not in self._rediscover_again:
                    return
        finally:
            self._rediscovering.discard(server_id)
            self._rediscover_again.discard(server_id)

    async def _record_health(self, tenant_id: str, server_id: UUID, health: "Health") -> None:
        status: McpStatus = "ok" if health.ok else "error"
        detail = health.detail
        if health.ok:
            entry = self._tenants.get(tenant_id)
            server = None if entry is None else entry.servers.get(server_id)
            detail = None if server is None else notes(server.record)
        detail = await self._redacted(tenant_id, detail)
        async with self._database.transaction() as connection:
            await McpServerRepository(connection, tenant_id).record_status(
                server_id, status=status, detail=detail, at=utc_now()
            )

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: "asyncio.Task[None]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("MCP server upkeep failed", exc_info=task.exception())


def offered(
    record: McpServerRecord,
) -> tuple[list[tuple[str, McpToolSpec]], list[tuple[str, str]]]:
    """The tools the server offered when last asked, each with its name for runs; and those
    skipped, each with why (at discovery, or because no name of its own is left for it)."""
    specs = [McpToolSpec.of(document) for document in record.tools if "skipped" not in document]
    tools, unnamed = named(record.name, specs)
    skipped = [
        (document["remote"], document["skipped"])
        for document in record.tools
        if "skipped" in document
    ]
    return tools, skipped + unnamed


def notes(record: McpServerRecord) -> str | None:
    """What a server's status says besides "ok": the tools skipped and why, and allowed tools
    it does not offer."""
    tools, skipped = offered(record)
    lines = [f"skipped {remote!r}: {reason}" for remote, reason in skipped]
    offers = {spec.remote for _, spec in tools} | {remote for remote, _ in skipped}
    missing = [name for name in record.allowed_tools or [] if name not in offers]
    if missing:
        lines.append("allowed_tools names tools it does not list: " + ", ".join(missing))
    return "; ".join(lines) or None


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """`value` (JSON-like) with `redact` applied to every string in it (keys as they are)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, redact) for key, item in value.items()}
    return value


def secret_names(headers: Mapping[str, Any]) -> tuple[str, ...]:
    """The tenant secrets `headers` (as stored) send, by name."""
    return tuple(
        str(value["secret"])
        for value in headers.values()
        if isinstance(value, Mapping) and "secret" in value
    )


def _health_of(record: McpServerRecord) -> "Health | None":
    from app.tools.mcp import Health

    if record.status == "ok":
        return Health(True)
    if record.status == "error":
        return Health(False, record.status_detail)
    return None
