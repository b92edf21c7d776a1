"""API keys looked up across tenants: by the digest of a secret a request sends (before its
tenant is known), by id for the runs of tasks submitted with one, and their last use. A
tenant's own keys are listed and changed through `app.resources.api_keys`."""

from datetime import datetime
from uuid import UUID

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.records import ApiKeyRecord
from app.storage.tables import api_keys


async def key_by_digest(connection: AsyncConnection, secret_sha256: str) -> ApiKeyRecord | None:
    """The key whose secret has this digest, of whichever tenant: authentication comes before
    a tenant is known (as a JWT's signature is checked before its tenant claim is read)."""
    statement = select(api_keys).where(api_keys.c.secret_sha256 == secret_sha256)
    row = (await connection.execute(statement)).first()
    return None if row is None else ApiKeyRecord.model_validate(row._mapping)


async def key_by_id(connection: AsyncConnection, key_id: UUID) -> ApiKeyRecord | None:
    """A key by id, of whichever tenant: for the runs of tasks submitted with it."""
    row = (await connection.execute(select(api_keys).where(api_keys.c.id == key_id))).first()
    return None if row is None else ApiKeyRecord.model_validate(row._mapping)


async def mark_used(connection: AsyncConnection, key_id: UUID, at: datetime) -> None:
    """Records a use, keeping the latest of concurrent ones."""
    c = api_keys.c
    await connection.execute(
        update(api_keys)
        .where(c.id == key_id, or_(c.last_used_at.is_(None), c.last_used_at < at))
        .values(last_used_at=at)
    )
