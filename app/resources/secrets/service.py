"""A tenant's secrets: each change is stored with its audit event (the name and scope, never
the value) in one transaction, then seen at once by this process's runs."""

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.errors import UNAVAILABLE, VALIDATION, ApiError, FieldProblem
from app.api.query import decode_key_cursor, encode_key_cursor
from app.api.secrets.schemas import SecretOut, SecretPage, SecretScope, SecretValue
from app.api.state import AppState
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.secrets import SecretVault
from app.runs.errors import NotFound
from app.storage.mcp_servers import McpServerRepository
from app.storage.remote_agents import RemoteAgentRepository
from app.storage.secrets import UNCHANGED, SecretRepository
from app.tools.header_values import PROBLEM, sendable


def vault_of(state: AppState) -> SecretVault:
    vault = state.toolbox.secrets
    if vault is None:
        raise ApiError(UNAVAILABLE, "this service keeps no tenant secrets")
    return vault


async def put_secret(
    state: AppState,
    vault: SecretVault,
    caller: Caller,
    tenant: Tenant,
    name: str,
    body: SecretValue,
) -> tuple[SecretOut, bool]:
    """Sets the secret (and who may use it, when given); True if it is new. A value that a
    header of the tenant's MCP servers or remote agents sends, and that a header cannot
    carry, is refused (422) before anything is stored."""
    value = body.value
    sealed = vault.seal(tenant.id, name, value)
    scoped = "usable_by" in body.model_fields_set
    async with state.database.transaction() as connection:
        await _check_sendable(connection, tenant.id, name, value)
        secrets = SecretRepository(connection, tenant.id)
        before = await secrets.get(name)
        record, created = await secrets.put(
            name,
            key_id=sealed.key_id,
            sealed=sealed.text,
            by=caller.subject,
            at=utc_now(),
            usable_by=body.usable_by_document() if scoped else UNCHANGED,
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
    _changed(state, vault, tenant.id)
    return SecretOut.of(record), created


async def set_scope(
    state: AppState,
    vault: SecretVault,
    caller: Caller,
    tenant: Tenant,
    name: str,
    body: SecretScope,
) -> SecretOut:
    """Changes who may use the secret; its value stays."""
    usable_by = None if body.usable_by is None else body.usable_by.model_dump()
    async with state.database.transaction() as connection:
        secrets = SecretRepository(connection, tenant.id)
        before = await secrets.get(name)
        record = await secrets.set_usable_by(name, usable_by, by=caller.subject, at=utc_now())
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
    _changed(state, vault, tenant.id)
    return SecretOut.of(record)


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
                raise ApiError(
                    VALIDATION,
                    f"the secret {name!r} cannot be sent as a header's value",
                    errors=[FieldProblem(field="body.value", message=message)],
                )


async def list_secrets(
    state: AppState, tenant: Tenant, *, cursor: str | None, limit: int
) -> SecretPage:
    after = decode_key_cursor(cursor) if cursor else None
    async with state.database.read() as connection:
        records = await SecretRepository(connection, tenant.id).page(after=after, limit=limit)
    items = [SecretOut.of(record) for record in records[:limit]]
    more = len(records) > limit
    return SecretPage(items=items, next_cursor=encode_key_cursor(items[-1].name) if more else None)


async def delete_secret(
    state: AppState, vault: SecretVault, caller: Caller, tenant: Tenant, name: str
) -> None:
    async with state.database.transaction() as connection:
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
    _changed(state, vault, tenant.id)


def _changed(state: AppState, vault: SecretVault, tenant_id: str) -> None:
    """Runs starting from now, and MCP sessions opened from now, use the tenant's secrets as
    they are now."""
    vault.changed(tenant_id)
    if state.toolbox.mcp is not None:
        state.toolbox.mcp.secrets_changed(tenant_id)
