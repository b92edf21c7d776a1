"""A tenant's secrets on behalf of a caller: each change is stored with its audit event (the
name and scope, never the value) in one transaction, then seen at once by this process's runs
and MCP sessions."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.errors import NotFound, OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.mcp_servers.sessions import McpServers
from app.resources.mcp_servers.store import McpServerRepository
from app.resources.remote_agents.store import RemoteAgentRepository
from app.resources.secrets.headers import UnsendableSecret
from app.resources.secrets.scopes import UsableBy
from app.resources.secrets.store import UNCHANGED, SecretRecord, SecretRepository, Unchanged
from app.resources.secrets.vault import SecretVault
from app.storage.database import Database
from app.tools.errors import FieldError
from app.tools.header_values import PROBLEM, sendable


class SecretsUnavailable(OmniForgeError):
    """This process keeps no tenant secrets: none can be set, scoped or deleted through it."""


@dataclass(frozen=True, slots=True)
class SecretService:
    """A tenant's secrets. Changes need the `vault` (`SecretsUnavailable` without one); after
    each, the vault and the MCP servers' sessions (`mcp`, when the process has them) use the
    secrets as they are now."""

    database: Database
    vault: SecretVault | None
    mcp: McpServers | None = None

    async def put(
        self,
        caller: Caller,
        tenant: Tenant,
        name: str,
        value: str,
        usable_by: UsableBy | Unchanged | None = UNCHANGED,
    ) -> tuple[SecretRecord, bool]:
        """Sets the secret (and who may use it, unless `UNCHANGED`); True if it is new. A
        value that a header of the tenant's MCP servers or remote agents sends, and that a
        header cannot carry, is refused (`UnsendableSecret`) before anything is stored."""
        vault = self._vault()
        sealed = vault.seal(tenant.id, name, value)
        async with self.database.transaction() as connection:
            await _check_sendable(connection, tenant.id, name, value)
            secrets = SecretRepository(connection, tenant.id)
            before = await secrets.get(name)
            record, created = await secrets.put(
                name,
                key_id=sealed.key_id,
                sealed=sealed.text,
                by=caller.subject,
                at=utc_now(),
                usable_by=usable_by if isinstance(usable_by, Unchanged) else _scope(usable_by),
            )
            await record_change(
                connection,
                caller,
                tenant.id,
                action=AuditAction.SECRET_PUT,
                before=None if before is None else _document(before.name, before.usable_by),
                after=_document(name, record.usable_by),
                resource_type="secret",
                resource_id=name,
            )
        await vault.learn(value)
        self._changed(vault, tenant.id)
        return record, created

    async def set_scope(
        self, caller: Caller, tenant: Tenant, name: str, usable_by: UsableBy | None
    ) -> SecretRecord:
        """Changes who may use the secret (None: anyone of the tenant); its value stays."""
        vault = self._vault()
        async with self.database.transaction() as connection:
            secrets = SecretRepository(connection, tenant.id)
            before = await secrets.get(name)
            record = await secrets.set_usable_by(
                name, _scope(usable_by), by=caller.subject, at=utc_now()
            )
            if before is None or record is None:
                raise NotFound("secret", name)
            await record_change(
                connection,
                caller,
                tenant.id,
                action=AuditAction.SECRET_SCOPE,
                before=_document(name, before.usable_by),
                after=_document(name, record.usable_by),
                resource_type="secret",
                resource_id=name,
            )
        self._changed(vault, tenant.id)
        return record

    async def page(self, tenant: Tenant, *, after: str | None, limit: int) -> list[SecretRecord]:
        """By name, after `after`: at most `limit + 1` (the extra one says there is more)."""
        async with self.database.read() as connection:
            return await SecretRepository(connection, tenant.id).page(after=after, limit=limit)

    async def delete(self, caller: Caller, tenant: Tenant, name: str) -> None:
        vault = self._vault()
        async with self.database.transaction() as connection:
            if not await SecretRepository(connection, tenant.id).delete(name):
                raise NotFound("secret", name)
            await record_change(
                connection,
                caller,
                tenant.id,
                action=AuditAction.SECRET_DELETE,
                before={"name": name},
                after=None,
                resource_type="secret",
                resource_id=name,
            )
        self._changed(vault, tenant.id)

    def _vault(self) -> SecretVault:
        if self.vault is None:
            raise SecretsUnavailable("this service keeps no tenant secrets")
        return self.vault

    def _changed(self, vault: SecretVault, tenant_id: str) -> None:
        """Runs starting from now, and MCP sessions opened from now, use the tenant's secrets
        as they are now."""
        vault.changed(tenant_id)
        if self.mcp is not None:
            self.mcp.secrets_changed(tenant_id)


def _scope(usable_by: UsableBy | None) -> dict[str, Any] | None:
    return None if usable_by is None else usable_by.model_dump()


def _document(name: str, usable_by: dict[str, Any] | None) -> dict[str, Any]:
    """A secret as audited: its name and scope, never its value."""
    return {"name": name, "usable_by": usable_by}


async def _check_sendable(
    connection: AsyncConnection, tenant_id: str, name: str, value: str
) -> None:
    """Refuses a value that a header of the tenant's MCP servers or remote agents sends (after
    its prefix) and that a header cannot carry; the message shows no character of it."""
    integrations: list[tuple[str, str, dict[str, Any]]] = [
        ("MCP server", record.name, record.headers)
        for record in await McpServerRepository(connection, tenant_id).all()
    ]
    integrations += [
        ("remote agent", record.name, record.headers)
        for record in await RemoteAgentRepository(connection, tenant_id).all()
    ]
    for kind, integration, headers in integrations:
        for header, given in headers.items():
            if not isinstance(given, dict) or given.get("secret") != name:
                continue
            if not sendable(str(given.get("prefix", "")) + value):
                message = (
                    f"is sent in the header {header!r} of the {kind} {integration!r}, and {PROBLEM}"
                )
                raise UnsendableSecret(
                    f"the secret {name!r} cannot be sent as a header's value",
                    [FieldError("value", message)],
                )
