"""A tenant's secrets as stored: sealed values (never plaintext) with the id of the key that
sealed them, and who set them when."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Select, Table, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from app.storage.repository import TenantScoped
from app.storage.tables import tenant_secrets


class SecretRecord(BaseModel):
    """A stored secret; `sealed` opens only with the key `key_id` names."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    name: str
    key_id: str
    sealed: str
    # Who may use it (`app.resources.secrets.scopes.UsableBy`'s document); None: anyone.
    usable_by: dict[str, Any] | None = None
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime


class Unchanged:
    """A field a change leaves as it was."""


UNCHANGED = Unchanged()


class SecretRepository(TenantScoped):
    async def get(self, name: str) -> SecretRecord | None:
        statement = select(tenant_secrets).where(
            tenant_secrets.c.tenant_id == self.tenant_id, tenant_secrets.c.name == name
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else SecretRecord.model_validate(row._mapping)

    async def all(self) -> list[SecretRecord]:
        """The tenant's secrets by name."""
        rows = (await self.connection.execute(self._by_name())).all()
        return [SecretRecord.model_validate(row._mapping) for row in rows]

    async def page(self, *, after: str | None, limit: int) -> list[SecretRecord]:
        """By name, at most `limit + 1` (the extra one says there is more)."""
        statement = self._by_name().limit(limit + 1)
        if after is not None:
            statement = statement.where(tenant_secrets.c.name > after)
        rows = (await self.connection.execute(statement)).all()
        return [SecretRecord.model_validate(row._mapping) for row in rows]

    async def put(
        self,
        name: str,
        *,
        key_id: str,
        sealed: str,
        by: str,
        at: datetime,
        usable_by: dict[str, Any] | Unchanged | None = UNCHANGED,
    ) -> tuple[SecretRecord, bool]:
        """Sets the secret; True if it is new, False if it replaced one. `usable_by` left
        `UNCHANGED` keeps a replaced secret's (a new one has none)."""
        values: dict[str, Any] = {
            "key_id": key_id,
            "sealed": sealed,
            "updated_by": by,
            "updated_at": at,
        }
        if not isinstance(usable_by, Unchanged):
            values["usable_by"] = usable_by
        new = {"tenant_id": self.tenant_id, "name": name, "created_by": by, "created_at": at}
        # Of two requests setting a new name at once, one inserts and the other replaces.
        insert_new = _insert(self.connection.dialect.name)(tenant_secrets)
        inserted = await self.connection.execute(
            insert_new.values(**new, **values).on_conflict_do_nothing()
        )
        created = bool(inserted.rowcount)
        if not created:
            await self.connection.execute(
                update(tenant_secrets)
                .where(tenant_secrets.c.tenant_id == self.tenant_id, tenant_secrets.c.name == name)
                .values(**values)
            )
        record = await self.get(name)
        assert record is not None  # a delete cannot come between: the row is locked
        return record, created

    async def set_usable_by(
        self, name: str, usable_by: dict[str, Any] | None, *, by: str, at: datetime
    ) -> SecretRecord | None:
        """Changes who may use the secret (its value stays); None if the tenant has none of
        that name."""
        result = await self.connection.execute(
            update(tenant_secrets)
            .where(tenant_secrets.c.tenant_id == self.tenant_id, tenant_secrets.c.name == name)
            .values(usable_by=usable_by, updated_by=by, updated_at=at)
        )
        return await self.get(name) if result.rowcount else None

    async def reseal(self, name: str, *, was: str, key_id: str, sealed: str) -> bool:
        """Replaces the sealed value of `name` if it is still sealed under key `was` (a value
        set meanwhile is left alone: it is sealed under the current key already)."""
        result = await self.connection.execute(
            update(tenant_secrets)
            .where(
                tenant_secrets.c.tenant_id == self.tenant_id,
                tenant_secrets.c.name == name,
                tenant_secrets.c.key_id == was,
            )
            .values(key_id=key_id, sealed=sealed)
        )
        return bool(result.rowcount)

    async def sealed_under_other_keys(
        self, key_id: str, *, after: str | None, limit: int
    ) -> list[SecretRecord]:
        """Secrets not sealed under `key_id`, by name, after `after`: a rotation's work."""
        statement = self._by_name().where(tenant_secrets.c.key_id != key_id).limit(limit)
        if after is not None:
            statement = statement.where(tenant_secrets.c.name > after)
        rows = (await self.connection.execute(statement)).all()
        return [SecretRecord.model_validate(row._mapping) for row in rows]

    async def delete(self, name: str) -> bool:
        result = await self.connection.execute(
            delete(tenant_secrets).where(
                tenant_secrets.c.tenant_id == self.tenant_id, tenant_secrets.c.name == name
            )
        )
        return bool(result.rowcount)

    def _by_name(self) -> Select[Any]:
        return (
            select(tenant_secrets)
            .where(tenant_secrets.c.tenant_id == self.tenant_id)
            .order_by(tenant_secrets.c.name)
        )


def _insert(dialect: str) -> Callable[[Table], postgresql.Insert | sqlite.Insert]:
    """The dialect's INSERT, which knows ON CONFLICT."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert
