"""A tenant's remote A2A agents and the tools their skills become: their cards fetched through
the SSRF guard when registered or refreshed and stored on their rows (so that every instance
offers the same tools), the tools built from the stored cards and kept for a short while."""

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from a2a.types import AgentCard

from app.caches import TtlCache
from app.resources.mcp_servers.sessions import SecretValues
from app.resources.remote_agents.store import RemoteAgentRecord, RemoteAgentRepository
from app.storage import Database
from app.storage.tenants import network_allow
from app.tools.a2a.cards import card_of, origin_of
from app.tools.a2a.client import A2AConnector
from app.tools.a2a.remote import RemoteAgentTool, skills_of
from app.tools.errors import ToolError
from app.tools.registry import RegisteredTool
from app.tools.services import NetworkPolicy, SecretUse, resolve_headers

# How long an instance offers a tenant's agents' tools as it last read them; changes made
# through this instance apply at once, others' within this time.
CACHE_TTL_S = 5.0
# Tenants whose agents' tools are kept at most.
MAX_CACHED_TENANTS = 10_000


class RemoteAgents:
    """Every tenant's remote agents. `tools_for` is what runs get (from a short cache);
    `fetch_card` fetches a card for the API (its headers' secrets resolved through `secrets`,
    its address checked with `network`, the operator's allow-list, and the tenant's own);
    `changed` tells it of a change made through the API."""

    def __init__(
        self,
        database: Database,
        *,
        secrets: SecretValues | None,
        network: NetworkPolicy,
        connector: A2AConnector,
        cache_ttl_s: float = CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._secrets = secrets
        self._network = network
        self.connector = connector
        self._cache = TtlCache[str, list[RegisteredTool]](
            ttl_s=cache_ttl_s, max_entries=MAX_CACHED_TENANTS, clock=clock
        )

    async def tools_for(self, tenant_id: str) -> list[RegisteredTool]:
        """The skills of the tenant's enabled agents, as tools (by their stored cards)."""
        return await self._cache.get_or_load(tenant_id, partial(self._read, tenant_id))

    def changed(self, tenant_id: str) -> None:
        """The tenant's agents changed: its next `tools_for` reads them again."""
        self._cache.invalidate(tenant_id)

    async def _read(self, tenant_id: str) -> list[RegisteredTool]:
        async with self._database.read() as connection:
            records = await RemoteAgentRepository(connection, tenant_id).all()
        return [tool for record in records if record.enabled for tool in self._tools(record)]

    async def fetch_card(
        self, tenant_id: str, url: str, headers: Mapping[str, Any], *, agent: str
    ) -> AgentCard:
        """The agent card at `url`, fetched with `headers` (secrets resolved, as sent by the
        remote agent named `agent`) where the tenant's network allow-list and the operator's
        let it go. Raises `ToolError` (its message without the tenant's secrets, whatever
        the other side echoed): `CardRefused` for a card that cannot be used,
        `DestinationRefused` for an address the guard refuses, `secret_not_found` for a
        header's unknown secret, `secret_out_of_scope` for one `agent` may not send."""
        async with self._database.read() as connection:
            allowed = await network_allow(connection, tenant_id)
        network = self._network.merged(NetworkPolicy.of(allowed)) if allowed else self._network
        secrets = self._secrets
        use = SecretUse("remote_agent", agent)
        lookup = None if secrets is None else partial(secrets.value, tenant_id, use=use)
        try:
            resolved = await resolve_headers(headers, lookup)
            return await self.connector.fetch_card(url, network=network, headers=resolved)
        except ToolError as exc:
            if secrets is not None:
                exc.message = (await secrets.redactor(tenant_id))(exc.message)
            raise

    def _tools(self, record: RemoteAgentRecord) -> list[RegisteredTool]:
        card = card_of(record.card)
        skills, _ = skills_of(record.name, card)
        return [
            RegisteredTool.of(
                RemoteAgentTool(
                    self.connector,
                    agent=record.name,
                    card=card,
                    origin=origin_of(record.card_url),
                    skill=skill,
                    headers=record.headers,
                )
            )
            for skill in skills
        ]
