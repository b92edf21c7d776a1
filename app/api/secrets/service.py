"""A tenant's secrets: each change is stored with its audit event (the name, never the value)
in one transaction, then seen at once by this process's runs."""

from app.api.access import Caller
from app.api.auditing import record_change
from app.api.errors import UNAVAILABLE, ApiError
from app.api.query import decode_key_cursor, encode_key_cursor
from app.api.secrets.schemas import SecretOut, SecretPage
from app.api.state import AppState
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.tenants import Tenant
from app.resources.secrets import SecretVault
from app.runs.errors import NotFound
from app.storage.secrets import SecretRepository


def vault_of(state: AppState) -> SecretVault:
    vault = state.toolbox.secrets
    if vault is None:
        raise ApiError(UNAVAILABLE, "this service keeps no tenant secrets")
    return vault


async def put_secret(
    state: AppState, vault: SecretVault, caller: Caller, tenant: Tenant, name: str, value: str
) -> tuple[SecretOut, bool]:
    """Sets the secret; True if it is new."""
    sealed = vault.seal(tenant.id, name, value)
    async with state.database.transaction() as connection:
        record, created = await SecretRepository(connection, tenant.id).put(
            name, key_id=sealed.key_id, sealed=sealed.text, by=caller.subject, at=utc_now()
        )
        await record_change(
            connection,
            caller,
            tenant.id,
            action=AuditAction.SECRET_PUT,
            before=None if created else {"name": name},
            after={"name": name},
            resource_type="secret",
            resource_id=name,
        )
    _changed(state, vault, tenant.id, value)
    return SecretOut.of(record), created


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


def _changed(state: AppState, vault: SecretVault, tenant_id: str, value: str | None = None) -> None:
    """Runs starting from now, and MCP sessions opened from now, use the tenant's secrets as
    they are now."""
    vault.changed(tenant_id, value)
    if state.toolbox.mcp is not None:
        state.toolbox.mcp.secrets_changed(tenant_id)
