"""A tenant's remote A2A agents on behalf of a caller: a card is fetched first (outside any
transaction: a remote agent never holds one), then the change is stored with its audit row in
one transaction."""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from a2a.types import AgentCard

from app.chain import ErrorCode
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.audited import AuditedRows
from app.resources.remote_agents.skills import RemoteAgents
from app.resources.remote_agents.store import RemoteAgentRecord, RemoteAgentRepository
from app.resources.secrets.headers import check_headers
from app.resources.secrets.vault import SecretVault
from app.storage.database import Database
from app.tools.a2a.cards import card_document, card_location
from app.tools.errors import FieldError, ToolError

_CONFIG = ("name", "card_url", "headers", "enabled", "skills")
# Failures of a card's fetch that the headers' secrets cause (the rest are the card's).
_HEADER_ERRORS = frozenset(
    {ErrorCode.SECRET_NOT_FOUND, ErrorCode.SECRET_OUT_OF_SCOPE, ErrorCode.INVALID_ARGUMENTS}
)


class RemoteAgentsUnavailable(OmniForgeError):
    """This process offers no remote agents: none can be registered or changed through it."""


class UnusableCard(OmniForgeError):
    """An agent's card that cannot be fetched or used: nothing is stored. `problems` name the
    field to change (`headers` for a secret the tenant has not set, or that the agent may
    not send; else `card_url`)."""

    def __init__(self, message: str, problems: list[FieldError]) -> None:
        super().__init__(message)
        self.problems = problems


@dataclass(frozen=True, slots=True)
class RemoteAgentService:
    """A tenant's remote agents. Changes need the process's `agents`
    (`RemoteAgentsUnavailable` without them), which fetch cards and then offer the tenant's
    runs the agents as they are now; headers naming a secret are checked against its value in
    the `vault`."""

    database: Database
    agents: RemoteAgents | None
    vault: SecretVault | None

    @property
    def _rows(self) -> AuditedRows[RemoteAgentRecord]:
        return AuditedRows(
            self.database,
            RemoteAgentRepository,
            _audit,
            "remote agent",
            AuditAction.REMOTE_AGENT_UPDATE,
            AuditAction.REMOTE_AGENT_DELETE,
            audited_fields=_audited_fields,
        )

    async def all(self, tenant: Tenant) -> list[RemoteAgentRecord]:
        return await self._rows.all(tenant)

    async def get(self, tenant: Tenant, agent_id: UUID) -> RemoteAgentRecord:
        return await self._rows.get(tenant, agent_id)

    async def create(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        name: str,
        card_url: str,
        headers: dict[str, Any],
        enabled: bool,
    ) -> RemoteAgentRecord:
        """Fetches the agent's card (`UnusableCard` when it cannot be used) and stores the
        agent with it (`RemoteAgentExists` if the name is taken). `headers` are as stored:
        text, or secrets by reference."""
        agents = self._agents()
        card_url = card_location(card_url)
        await check_headers(self.vault, tenant.id, headers)
        card = await _fetched(agents, tenant, name, card_url, headers)
        async with self.database.transaction() as connection:
            record = await RemoteAgentRepository(connection, tenant.id).create(
                name=name,
                card_url=card_url,
                headers=headers,
                card=card_document(card),
                enabled=enabled,
                by=caller.subject,
                at=utc_now(),
            )
            await _audit(connection, caller, tenant, AuditAction.REMOTE_AGENT_CREATE, None, record)
        agents.changed(tenant.id)
        return record

    async def update(
        self,
        caller: Caller,
        tenant: Tenant,
        agent_id: UUID,
        changes: dict[str, Any],
        *,
        refetch: bool,
    ) -> RemoteAgentRecord:
        """Sets `changes` (columns: name, headers, enabled); with `refetch` its card is
        fetched again first, and nothing changes when that fails."""
        agents = self._agents()
        if refetch:
            current = await self.get(tenant, agent_id)
            headers = changes.get("headers", current.headers)
            await check_headers(self.vault, tenant.id, headers)
            name = changes.get("name", current.name)
            card = await _fetched(agents, tenant, name, current.card_url, headers)
            changes = changes | {"card": card_document(card), "fetched_at": utc_now()}
        record, changed = await self._rows.update(caller, tenant, agent_id, changes)
        if changed:
            agents.changed(tenant.id)
        return record

    async def delete(self, caller: Caller, tenant: Tenant, agent_id: UUID) -> None:
        agents = self._agents()
        await self._rows.delete(caller, tenant, agent_id)
        agents.changed(tenant.id)

    def _agents(self) -> RemoteAgents:
        if self.agents is None:
            raise RemoteAgentsUnavailable("this process offers no remote agents")
        return self.agents


async def _fetched(
    agents: RemoteAgents, tenant: Tenant, name: str, card_url: str, headers: dict[str, Any]
) -> AgentCard:
    """The card at `card_url`, fetched as the agent `name` would be called."""
    try:
        return await agents.fetch_card(tenant.id, card_url, headers, agent=name)
    except ToolError as exc:
        field = "headers" if exc.error_code in _HEADER_ERRORS else "card_url"
        raise UnusableCard(
            f"the agent card at {card_url} cannot be used: {exc.message}",
            [FieldError(field, exc.message)],
        ) from None


def audited(record: RemoteAgentRecord, fields: set[str] | None = None) -> dict[str, Any]:
    """An agent's configuration as the audit log keeps it: headers' secret references as
    they are, their text values as `[text]` (a header may hold a credential), its card's
    skills by id."""
    document: dict[str, Any] = {
        "name": record.name,
        "card_url": record.card_url,
        "headers": {
            name: value if isinstance(value, dict) else "[text]"
            for name, value in record.headers.items()
        },
        "enabled": record.enabled,
        "skills": [skill.get("id") for skill in record.card.get("skills", [])],
    }
    return {name: document[name] for name in _CONFIG if fields is None or name in fields}


def _audited_fields(changed: set[str]) -> set[str]:
    """An update's audited fields: a new card as its skills; a refresh that found the same
    card only moves `fetched_at`, which is not audited."""
    return {"skills" if name == "card" else name for name in changed} - {"fetched_at"}


_audit = ResourceAudit("remote_agent", audited)
