"""A tenant's webhook endpoints, the secret of its tasks' one-off webhooks, and its deliveries
with their attempts, as stored; an endpoint's secret only sealed."""

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.ids import uuid4
from app.storage.repository import TenantScoped
from app.storage.tables import (
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_task_secrets,
)
from app.storage.webhook_outbox import PENDING


class EndpointRecord(BaseModel):
    """A stored endpoint; its secret stays sealed (`key_id`, `sealed_secret`)."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    url: str
    description: str | None
    events: list[str]
    enabled: bool
    key_id: str
    sealed_secret: str
    created_by: str
    created_at: datetime
    updated_at: datetime


class DeliveryRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant_id: str
    endpoint_id: UUID | None
    url: str | None
    task_id: UUID | None
    event: str
    payload: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    give_up_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class AttemptRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    number: int
    url: str
    started_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    response: str | None


class WebhookRepository(TenantScoped):
    async def all(self) -> list[EndpointRecord]:
        e = webhook_endpoints.c
        statement = (
            select(webhook_endpoints)
            .where(e.tenant_id == self.tenant_id)
            .order_by(e.created_at, e.id)
        )
        rows = (await self.connection.execute(statement)).all()
        return [EndpointRecord.model_validate(row._mapping) for row in rows]

    async def get(self, endpoint_id: UUID) -> EndpointRecord | None:
        e = webhook_endpoints.c
        statement = select(webhook_endpoints).where(
            e.tenant_id == self.tenant_id, e.id == endpoint_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else EndpointRecord.model_validate(row._mapping)

    async def create(self, values: dict[str, Any], *, by: str, at: datetime) -> EndpointRecord:
        """A new endpoint: `values` hold url, description, events, enabled and its sealed
        secret (key_id, sealed_secret); `id` may be given (its secret is bound to it)."""
        endpoint_id = values.pop("id", None) or uuid4()
        await self.connection.execute(
            insert(webhook_endpoints).values(
                id=endpoint_id,
                tenant_id=self.tenant_id,
                created_by=by,
                created_at=at,
                updated_at=at,
                **values,
            )
        )
        record = await self.get(endpoint_id)
        assert record is not None
        return record

    async def update(
        self, endpoint_id: UUID, changes: dict[str, Any], *, at: datetime
    ) -> EndpointRecord | None:
        e = webhook_endpoints.c
        await self.connection.execute(
            update(webhook_endpoints)
            .where(e.tenant_id == self.tenant_id, e.id == endpoint_id)
            .values(**changes, updated_at=at)
        )
        return await self.get(endpoint_id)

    async def delete(self, endpoint_id: UUID) -> bool:
        """Removes the endpoint and its deliveries (their attempts with them)."""
        e, d = webhook_endpoints.c, webhook_deliveries.c
        result = await self.connection.execute(
            delete(webhook_endpoints).where(e.tenant_id == self.tenant_id, e.id == endpoint_id)
        )
        await self.connection.execute(
            delete(webhook_deliveries).where(
                d.tenant_id == self.tenant_id, d.endpoint_id == endpoint_id
            )
        )
        return bool(result.rowcount)

    async def deliveries(
        self,
        *,
        endpoint_id: UUID | None,
        task_id: UUID | None,
        one_off: bool,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[DeliveryRecord]:
        """Newest first: an endpoint's, the one-off ones (`one_off`), or all; of one task."""
        d = webhook_deliveries.c
        statement = select(webhook_deliveries).where(d.tenant_id == self.tenant_id)
        if endpoint_id is not None:
            statement = statement.where(d.endpoint_id == endpoint_id)
        elif one_off:
            statement = statement.where(d.endpoint_id.is_(None))
        if task_id is not None:
            statement = statement.where(d.task_id == task_id)
        if before is not None:
            at, delivery_id = before
            statement = statement.where(
                (d.created_at < at) | ((d.created_at == at) & (d.id < delivery_id))
            )
        statement = statement.order_by(d.created_at.desc(), d.id.desc()).limit(limit)
        rows = (await self.connection.execute(statement)).all()
        return [DeliveryRecord.model_validate(row._mapping) for row in rows]

    async def delivery(self, delivery_id: UUID) -> DeliveryRecord | None:
        d = webhook_deliveries.c
        statement = select(webhook_deliveries).where(
            d.tenant_id == self.tenant_id, d.id == delivery_id
        )
        row = (await self.connection.execute(statement)).first()
        return None if row is None else DeliveryRecord.model_validate(row._mapping)

    async def attempts(self, delivery_id: UUID) -> list[AttemptRecord]:
        a = webhook_attempts.c
        statement = (
            select(webhook_attempts)
            .where(a.tenant_id == self.tenant_id, a.delivery_id == delivery_id)
            .order_by(a.id)
        )
        rows = (await self.connection.execute(statement)).all()
        return [AttemptRecord.model_validate(row._mapping) for row in rows]

    async def redeliver(
        self, delivery_id: UUID, *, at: datetime, retry_for: timedelta
    ) -> DeliveryRecord | None:
        """The delivery due again now, with a new retry window (its id, so its
        `webhook-id`, stays the same)."""
        d = webhook_deliveries.c
        await self.connection.execute(
            update(webhook_deliveries)
            .where(d.tenant_id == self.tenant_id, d.id == delivery_id)
            .values(
                status=PENDING,
                next_attempt_at=at,
                give_up_at=at + retry_for,
                delivered_at=None,
            )
        )
        return await self.delivery(delivery_id)

    async def task_secret(self) -> tuple[str, str, datetime] | None:
        """The sealed secret of the tenant's one-off task webhooks: key id, text, when set."""
        s = webhook_task_secrets.c
        row = (
            await self.connection.execute(
                select(s.key_id, s.sealed_secret, s.updated_at).where(s.tenant_id == self.tenant_id)
            )
        ).first()
        return None if row is None else (row[0], row[1], row[2])

    async def add_task_secret(self, key_id: str, sealed: str, *, at: datetime) -> bool:
        """Stores the first task secret of the tenant; False when one exists already."""
        try:
            async with self.connection.begin_nested():
                await self.connection.execute(
                    insert(webhook_task_secrets).values(
                        tenant_id=self.tenant_id,
                        key_id=key_id,
                        sealed_secret=sealed,
                        created_at=at,
                        updated_at=at,
                    )
                )
        except IntegrityError:
            return False
        return True

    async def replace_task_secret(self, key_id: str, sealed: str, *, at: datetime) -> None:
        s = webhook_task_secrets.c
        await self.connection.execute(
            update(webhook_task_secrets)
            .where(s.tenant_id == self.tenant_id)
            .values(key_id=key_id, sealed_secret=sealed, updated_at=at)
        )
