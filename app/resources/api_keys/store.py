"""A tenant's API keys as stored: the digest of each secret, never the secret."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, insert, select, update

from app.storage.pagination import Cursor, Page
from app.storage.records import ApiKeyRecord
from app.storage.repository import TenantScoped
from app.storage.tables import api_keys


class ApiKeyRepository(TenantScoped):
    def _select(self) -> Select[Any]:
        return select(api_keys).where(api_keys.c.tenant_id == self.tenant_id)

    async def create(
        self,
        *,
        key_id: UUID,
        name: str,
        prefix: str,
        secret_sha256: str,
        roles: Sequence[str],
        quotas: dict[str, Any] | None,
        by: str,
        at: datetime,
        expires_at: datetime | None,
    ) -> ApiKeyRecord:
        values: dict[str, Any] = {
            "id": key_id,
            "tenant_id": self.tenant_id,
            "name": name,
            "prefix": prefix,
            "secret_sha256": secret_sha256,
            "roles": list(roles),
            "quotas": quotas,
            "created_by": by,
            "created_at": at,
            "expires_at": expires_at,
            "last_used_at": None,
            "revoked_at": None,
            "revoked_by": None,
        }
        await self.connection.execute(insert(api_keys).values(**values))
        return ApiKeyRecord.model_validate(values)

    async def get(self, key_id: UUID) -> ApiKeyRecord | None:
        row = (await self.connection.execute(self._select().where(api_keys.c.id == key_id))).first()
        return None if row is None else ApiKeyRecord.model_validate(row._mapping)

    async def page(
        self, *, cursor: Cursor | None, limit: int, include_revoked: bool
    ) -> Page[ApiKeyRecord]:
        """Newest first."""
        c = api_keys.c
        statement = self._select()
        if not include_revoked:
            statement = statement.where(c.revoked_at.is_(None))
        if cursor is not None:
            statement = statement.where(cursor.before(c.created_at, c.id))
        statement = statement.order_by(c.created_at.desc(), c.id.desc()).limit(limit + 1)
        rows = (await self.connection.execute(statement)).all()
        fetched = [ApiKeyRecord.model_validate(row._mapping) for row in rows]
        return Page.of(fetched, limit, lambda item: Cursor(item.created_at, item.id))

    async def revoke(self, key_id: UUID, *, by: str, at: datetime) -> ApiKeyRecord | None:
        """Revokes the key (a revoked one stays as it was); None if the tenant has none by
        that id."""
        await self.connection.execute(
            update(api_keys)
            .where(
                api_keys.c.tenant_id == self.tenant_id,
                api_keys.c.id == key_id,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=at, revoked_by=by)
        )
        return await self.get(key_id)
