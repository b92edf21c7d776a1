"""Idempotency keys of task submissions: which task a caller's key made, and for which body.

A key is claimed in the transaction that stores its task (`claim_key`, called by
`TaskQueue.create`): the primary key (tenant, caller, key) makes a concurrent duplicate wait for
the first transaction and then fail (`KeyTaken`), on every instance sharing the database."""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.errors import OmniForgeError
from app.storage.repository import TenantScoped
from app.storage.tables import idempotency_keys


@dataclass(frozen=True, slots=True)
class KeyClaim:
    """A submission's key, to be stored with its task: who gave it, its body's hash, and
    until when it holds."""

    principal: str
    key: str
    request_sha256: str
    at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class KeyRecord:
    task_id: UUID
    request_sha256: str
    created_at: datetime
    expires_at: datetime


class KeyTaken(OmniForgeError):
    """Another submission with the key was stored first (or is being stored)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"idempotency key {key!r} is taken")
        self.key = key


class IdempotencyKeys(TenantScoped):
    async def find(self, principal: str, key: str, *, now: datetime) -> KeyRecord | None:
        """The caller's key, unless it has expired."""
        k = idempotency_keys.c
        statement = select(k.task_id, k.request_sha256, k.created_at, k.expires_at).where(
            k.tenant_id == self.tenant_id,
            k.principal == principal,
            k.key == key,
            k.expires_at > now,
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else KeyRecord(row[0], row[1], row[2], row[3])


async def claim_key(
    connection: AsyncConnection, tenant_id: str, task_id: UUID, claim: KeyClaim
) -> None:
    """Stores `claim` for the task about to be stored in this transaction; an expired row of
    the same key gives way. `KeyTaken` when the key is live (the transaction is then to be
    rolled back)."""
    k = idempotency_keys.c
    mine = (k.tenant_id == tenant_id) & (k.principal == claim.principal) & (k.key == claim.key)
    await connection.execute(delete(idempotency_keys).where(mine, k.expires_at <= claim.at))
    try:
        await connection.execute(
            insert(idempotency_keys).values(
                tenant_id=tenant_id,
                principal=claim.principal,
                key=claim.key,
                request_sha256=claim.request_sha256,
                task_id=task_id,
                created_at=claim.at,
                expires_at=claim.expires_at,
            )
        )
    except IntegrityError as exc:
        raise KeyTaken(claim.key) from exc
