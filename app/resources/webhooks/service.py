"""A tenant's webhook endpoints and deliveries on behalf of its admins: each change stored with
its audit row in one transaction; URLs checked by the SSRF guard before they are stored."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.errors import NotFound, OmniForgeError
from app.governance.audit import AuditAction
from app.governance.auditing import ResourceAudit, record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.ids import uuid4
from app.resources.audited import AuditedRows
from app.resources.webhooks import Webhooks
from app.resources.webhooks.signing import endpoint_secret_name, new_secret
from app.resources.webhooks.store import (
    AttemptRecord,
    DeliveryRecord,
    EndpointRecord,
    WebhookRepository,
)
from app.resources.webhooks.urls import refusal
from app.storage.database import Database
from app.tools.services import NetworkPolicy


class WebhooksUnavailable(OmniForgeError):
    """This process sends no webhooks: none can be registered, changed or redelivered
    through it."""


class UnreachableWebhook(OmniForgeError):
    """The SSRF guard refuses an endpoint's URL under the tenant's network allow-lists;
    `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__("the webhook's URL cannot be reached from this service")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class WebhookService:
    """A tenant's webhooks. Changes need `webhooks` (`WebhooksUnavailable` without); after
    each, runs starting from now deliver to the endpoints as they are now. `network_of` is
    where the tenant's deliveries may go; a redelivery is retried for `retry_for`."""

    database: Database
    webhooks: Webhooks | None
    network_of: Callable[[Tenant], NetworkPolicy]
    retry_for: timedelta

    @property
    def _rows(self) -> AuditedRows[EndpointRecord]:
        return AuditedRows(
            self.database,
            WebhookRepository,
            _audit,
            "webhook",
            AuditAction.WEBHOOK_UPDATE,
            AuditAction.WEBHOOK_DELETE,
            audited_fields=lambda _changed: None,  # the whole endpoint, before and after
        )

    async def endpoints(self, tenant: Tenant) -> list[EndpointRecord]:
        """Oldest first."""
        return await self._rows.all(tenant)

    async def endpoint(self, tenant: Tenant, webhook_id: UUID) -> EndpointRecord:
        return await self._rows.get(tenant, webhook_id)

    async def create(
        self,
        caller: Caller,
        tenant: Tenant,
        *,
        url: str,
        events: Sequence[str],
        description: str | None,
        enabled: bool,
    ) -> tuple[EndpointRecord, str]:
        """The new endpoint and its signing secret (shown this once; stored sealed, bound to
        the endpoint)."""
        hooks = self._webhooks()
        await self._check_url(tenant, url)
        endpoint_id = uuid4()
        secret = new_secret()
        sealed = hooks.keys.seal(tenant.id, endpoint_secret_name(endpoint_id), secret)
        values: dict[str, Any] = {
            "id": endpoint_id,
            "url": url,
            "description": description,
            "events": list(events),
            "enabled": enabled,
            "key_id": sealed.key_id,
            "sealed_secret": sealed.text,
        }
        async with self.database.transaction() as connection:
            record = await WebhookRepository(connection, tenant.id).create(
                values, by=caller.subject, at=utc_now()
            )
            await _audit(connection, caller, tenant, AuditAction.WEBHOOK_CREATE, None, record)
        hooks.subscriptions.changed(tenant.id)
        return record, secret

    async def update(
        self, caller: Caller, tenant: Tenant, webhook_id: UUID, changes: dict[str, Any]
    ) -> EndpointRecord:
        """Changes the fields given (url, events, description, enabled); those already so
        change nothing and are not audited. Enabling it makes what waited for it due."""
        hooks = self._webhooks()
        if "url" in changes:
            await self._check_url(tenant, changes["url"])
        record, changed = await self._rows.update(caller, tenant, webhook_id, changes)
        if changed:
            hooks.subscriptions.changed(tenant.id)
        if changed.get("enabled"):
            hooks.dispatcher.wake()  # what waited for it is due
        return record

    async def delete(self, caller: Caller, tenant: Tenant, webhook_id: UUID) -> None:
        """Removes the endpoint with its deliveries."""
        hooks = self._webhooks()
        await self._rows.delete(caller, tenant, webhook_id)
        hooks.subscriptions.changed(tenant.id)

    async def rotate_secret(
        self, caller: Caller, tenant: Tenant, webhook_id: UUID
    ) -> tuple[EndpointRecord, str]:
        """A new signing secret, shown once; the old one signs no more."""
        hooks = self._webhooks()
        secret = new_secret()
        sealed = hooks.keys.seal(tenant.id, endpoint_secret_name(webhook_id), secret)
        async with self.database.transaction() as connection:
            repository = WebhookRepository(connection, tenant.id)
            if await repository.get(webhook_id) is None:
                raise self._rows.not_found(webhook_id)
            changes = {"key_id": sealed.key_id, "sealed_secret": sealed.text}
            record = await repository.update(webhook_id, changes, at=utc_now())
            assert record is not None
            await _audit_rotation(connection, caller, tenant, str(webhook_id))
        return record, secret

    async def task_secret(self, tenant: Tenant) -> tuple[str, datetime]:
        """The secret of the tenant's tasks' one-off webhooks (made on first use), and when
        it was set."""
        return await self._webhooks().keys.task_secret(tenant.id)

    async def rotate_task_secret(self, caller: Caller, tenant: Tenant) -> tuple[str, datetime]:
        """A new secret of the tenant's tasks' one-off webhooks, and when it was set."""
        secret, at = await self._webhooks().keys.rotate_task_secret(tenant.id)
        async with self.database.transaction() as connection:
            await _audit_rotation(connection, caller, tenant, "tasks")
        return secret, at

    async def deliveries(
        self,
        tenant: Tenant,
        *,
        webhook_id: UUID | None,
        task_id: UUID | None,
        one_off: bool,
        limit: int,
    ) -> list[DeliveryRecord]:
        """Newest first: an endpoint's (`webhook_id`), the one-off ones (`one_off`), or all;
        of one task (`task_id`) or any."""
        async with self.database.read() as connection:
            repository = WebhookRepository(connection, tenant.id)
            if webhook_id is not None and await repository.get(webhook_id) is None:
                raise self._rows.not_found(webhook_id)
            return await repository.deliveries(
                endpoint_id=webhook_id, task_id=task_id, one_off=one_off, before=None, limit=limit
            )

    async def delivery(
        self, tenant: Tenant, delivery_id: UUID
    ) -> tuple[DeliveryRecord, list[AttemptRecord]]:
        """The delivery with its attempts, first to last."""
        async with self.database.read() as connection:
            repository = WebhookRepository(connection, tenant.id)
            record = await repository.delivery(delivery_id)
            if record is None:
                raise NotFound("webhook delivery", delivery_id)
            return record, await repository.attempts(delivery_id)

    async def redeliver(self, caller: Caller, tenant: Tenant, delivery_id: UUID) -> DeliveryRecord:
        """Sends the delivery again now (the same `webhook-id`), retried as a new one would be."""
        hooks = self._webhooks()
        async with self.database.transaction() as connection:
            record = await WebhookRepository(connection, tenant.id).redeliver(
                delivery_id, at=utc_now(), retry_for=self.retry_for
            )
            if record is None:
                raise NotFound("webhook delivery", delivery_id)
            await record_change(
                connection,
                caller,
                tenant.id,
                action=AuditAction.WEBHOOK_REDELIVER,
                before=None,
                after={"delivery_id": str(delivery_id)},
                resource_type="webhook",
                resource_id=str(record.endpoint_id or "tasks"),
            )
        hooks.dispatcher.wake()
        return record

    def _webhooks(self) -> Webhooks:
        if self.webhooks is None:
            raise WebhooksUnavailable("this process offers no webhooks")
        return self.webhooks

    async def _check_url(self, tenant: Tenant, url: str) -> None:
        why = await refusal(url, self.network_of(tenant))
        if why is not None:
            raise UnreachableWebhook(why)


async def _audit_rotation(
    connection: AsyncConnection, caller: Caller, tenant: Tenant, resource_id: str
) -> None:
    """A secret replaced: who did, of which endpoint (`tasks`: the one-off webhooks'); never
    a secret."""
    await record_change(
        connection,
        caller,
        tenant.id,
        action=AuditAction.WEBHOOK_ROTATE,
        before=None,
        after=None,
        resource_type="webhook",
        resource_id=resource_id,
    )


def _audited(record: EndpointRecord, _fields: set[str] | None = None) -> dict[str, Any]:
    """An endpoint as the audit log keeps it: never its secret."""
    return {
        "url": record.url,
        "events": record.events,
        "enabled": record.enabled,
        "description": record.description,
    }


_audit = ResourceAudit("webhook", _audited)
