"""A tenant's webhook endpoints and deliveries on behalf of its admins: each change stored with
its audit row in one transaction; URLs checked by the SSRF guard before they are stored."""

from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy.ext.asyncio import AsyncConnection

from app.api.errors import UNAVAILABLE, VALIDATION, ApiError, FieldProblem
from app.api.state import AppState
from app.api.webhooks.schemas import (
    AttemptOut,
    DeliveryDetail,
    DeliveryList,
    DeliveryOut,
    TaskSecretOut,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookOut,
    WebhookUpdate,
)
from app.chain.models import utc_now
from app.governance.audit import AuditAction
from app.governance.auditing import record_change
from app.governance.callers import Caller
from app.governance.tenants import Tenant
from app.resources.webhooks import Webhooks
from app.resources.webhooks.signing import endpoint_secret_name, new_secret
from app.resources.webhooks.subscriptions import NONE, Subscriptions
from app.resources.webhooks.urls import refusal
from app.runs.errors import InvalidSubmission, NotFound
from app.storage.webhooks import EndpointRecord, WebhookRepository
from app.tools.errors import FieldError


def webhooks_of(state: AppState) -> Webhooks:
    if state.webhooks is None:
        raise ApiError(UNAVAILABLE, "this process offers no webhooks")
    return state.webhooks


async def subscriptions_of(state: AppState, tenant_id: str) -> Subscriptions:
    """The tenant's enabled endpoints, as a run starting now uses them (cached)."""
    return NONE if state.webhooks is None else await state.webhooks.subscriptions.of(tenant_id)


async def check_task_webhook(state: AppState, tenant: Tenant, url: str) -> None:
    """A task's one-off `webhook_url` must pass the SSRF guard (422 naming the field)."""
    why = await refusal(url, state.toolbox.network_of(tenant))
    if why is not None:
        raise InvalidSubmission([FieldError("webhook_url", why)])


async def _checked_url(state: AppState, tenant: Tenant, url: str) -> None:
    why = await refusal(url, state.toolbox.network_of(tenant))
    if why is not None:
        raise ApiError(
            VALIDATION,
            "the webhook's URL cannot be reached from this service",
            errors=[FieldProblem(field="body.url", message=why)],
        )


async def list_webhooks(state: AppState, tenant: Tenant) -> WebhookList:
    async with state.database.read() as connection:
        records = await WebhookRepository(connection, tenant.id).endpoints()
    return WebhookList(items=[WebhookOut.of(record) for record in records])


async def read_webhook(state: AppState, tenant: Tenant, webhook_id: UUID) -> WebhookOut:
    async with state.database.read() as connection:
        record = await WebhookRepository(connection, tenant.id).endpoint(webhook_id)
    if record is None:
        raise _not_found(webhook_id)
    return WebhookOut.of(record)


async def create_webhook(
    state: AppState, caller: Caller, tenant: Tenant, body: WebhookCreate
) -> WebhookCreated:
    hooks = webhooks_of(state)
    await _checked_url(state, tenant, body.url)
    endpoint_id = uuid4()
    secret = new_secret()
    sealed = hooks.keys.seal(tenant.id, endpoint_secret_name(endpoint_id), secret)
    values: dict[str, Any] = {
        "id": endpoint_id,
        "url": body.url,
        "description": body.description,
        "events": list(body.events),
        "enabled": body.enabled,
        "key_id": sealed.key_id,
        "sealed_secret": sealed.text,
    }
    async with state.database.transaction() as connection:
        record = await WebhookRepository(connection, tenant.id).create(
            values, by=caller.subject, at=utc_now()
        )
        await _audit(connection, caller, tenant, AuditAction.WEBHOOK_CREATE, None, record)
    hooks.subscriptions.changed(tenant.id)
    return WebhookCreated(**WebhookOut.of(record).model_dump(), secret=secret)


async def update_webhook(
    state: AppState, caller: Caller, tenant: Tenant, webhook_id: UUID, body: WebhookUpdate
) -> WebhookOut:
    hooks = webhooks_of(state)
    changes = body.changes()
    if "url" in changes:
        await _checked_url(state, tenant, changes["url"])
    async with state.database.transaction() as connection:
        repository = WebhookRepository(connection, tenant.id)
        before = await repository.endpoint(webhook_id)
        if before is None:
            raise _not_found(webhook_id)
        changes = {name: value for name, value in changes.items() if getattr(before, name) != value}
        if not changes:
            return WebhookOut.of(before)
        record = await repository.update(webhook_id, changes, at=utc_now())
        assert record is not None
        await _audit(connection, caller, tenant, AuditAction.WEBHOOK_UPDATE, before, record)
    hooks.subscriptions.changed(tenant.id)
    if changes.get("enabled"):
        hooks.dispatcher.wake()  # what waited for it is due
    return WebhookOut.of(record)


async def delete_webhook(state: AppState, caller: Caller, tenant: Tenant, webhook_id: UUID) -> None:
    hooks = webhooks_of(state)
    async with state.database.transaction() as connection:
        repository = WebhookRepository(connection, tenant.id)
        before = await repository.endpoint(webhook_id)
        if before is None or not await repository.delete(webhook_id):
            raise _not_found(webhook_id)
        await _audit(connection, caller, tenant, AuditAction.WEBHOOK_DELETE, before, None)
    hooks.subscriptions.changed(tenant.id)


async def rotate_secret(
    state: AppState, caller: Caller, tenant: Tenant, webhook_id: UUID
) -> WebhookCreated:
    """A new signing secret, shown once; the old one signs no more."""
    hooks = webhooks_of(state)
    secret = new_secret()
    sealed = hooks.keys.seal(tenant.id, endpoint_secret_name(webhook_id), secret)
    async with state.database.transaction() as connection:
        repository = WebhookRepository(connection, tenant.id)
        if await repository.endpoint(webhook_id) is None:
            raise _not_found(webhook_id)
        changes = {"key_id": sealed.key_id, "sealed_secret": sealed.text}
        record = await repository.update(webhook_id, changes, at=utc_now())
        assert record is not None
        await record_change(
            connection,
            caller,
            tenant.id,
            action=AuditAction.WEBHOOK_ROTATE,
            before=None,
            after=None,
            resource_type="webhook",
            resource_id=str(webhook_id),
        )
    return WebhookCreated(**WebhookOut.of(record).model_dump(), secret=secret)


async def read_task_secret(state: AppState, tenant: Tenant) -> TaskSecretOut:
    secret, at = await webhooks_of(state).keys.task_secret(tenant.id)
    return TaskSecretOut(secret=secret, updated_at=at)


async def rotate_task_secret(state: AppState, caller: Caller, tenant: Tenant) -> TaskSecretOut:
    secret, at = await webhooks_of(state).keys.rotate_task_secret(tenant.id)
    async with state.database.transaction() as connection:
        await record_change(
            connection,
            caller,
            tenant.id,
            action=AuditAction.WEBHOOK_ROTATE,
            before=None,
            after=None,
            resource_type="webhook",
            resource_id="tasks",
        )
    return TaskSecretOut(secret=secret, updated_at=at)


async def list_deliveries(
    state: AppState,
    tenant: Tenant,
    *,
    webhook_id: UUID | None,
    task_id: UUID | None,
    one_off: bool,
    limit: int,
) -> DeliveryList:
    async with state.database.read() as connection:
        repository = WebhookRepository(connection, tenant.id)
        if webhook_id is not None and await repository.endpoint(webhook_id) is None:
            raise _not_found(webhook_id)
        records = await repository.deliveries(
            endpoint_id=webhook_id, task_id=task_id, one_off=one_off, before=None, limit=limit
        )
    return DeliveryList(items=[DeliveryOut.of(record) for record in records])


async def read_delivery(state: AppState, tenant: Tenant, delivery_id: UUID) -> DeliveryDetail:
    async with state.database.read() as connection:
        repository = WebhookRepository(connection, tenant.id)
        record = await repository.delivery(delivery_id)
        if record is None:
            raise NotFound("webhook delivery", delivery_id)
        attempts = await repository.attempts(delivery_id)
    return DeliveryDetail(
        **DeliveryOut.of(record).model_dump(),
        attempt_list=[AttemptOut.of(attempt) for attempt in attempts],
    )


async def redeliver(
    state: AppState, caller: Caller, tenant: Tenant, delivery_id: UUID
) -> DeliveryOut:
    """Sends the delivery again now (the same `webhook-id`), retried as a new one would be."""
    hooks = webhooks_of(state)
    retry_for = timedelta(seconds=state.settings.webhook_retry_for_s)
    async with state.database.transaction() as connection:
        record = await WebhookRepository(connection, tenant.id).redeliver(
            delivery_id, at=utc_now(), retry_for=retry_for
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
    return DeliveryOut.of(record)


async def _audit(
    connection: AsyncConnection,
    caller: Caller,
    tenant: Tenant,
    action: AuditAction,
    before: EndpointRecord | None,
    after: EndpointRecord | None,
) -> None:
    subject = after or before
    assert subject is not None
    await record_change(
        connection,
        caller,
        tenant.id,
        action=action,
        before=None if before is None else _audited(before),
        after=None if after is None else _audited(after),
        resource_type="webhook",
        resource_id=str(subject.id),
    )


def _audited(record: EndpointRecord) -> dict[str, Any]:
    """An endpoint as the audit log keeps it: never its secret."""
    return {
        "url": record.url,
        "events": record.events,
        "enabled": record.enabled,
        "description": record.description,
    }


def _not_found(webhook_id: UUID) -> NotFound:
    return NotFound("webhook", str(webhook_id))
