"""/api/v1/tenants/{tenant_id}/webhooks: a tenant's webhook endpoints, the secret of its tasks'
one-off webhooks, and the deliveries with their attempts."""

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response, status

from app.api.access import RequireWebhookConfigure, TenantForWebhookConfigure
from app.api.errors import problems
from app.api.inputs import CheckedRoute
from app.api.services import TenantWebhooks
from app.api.webhooks.schemas import (
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

router = APIRouter(prefix="/api/v1/tenants", tags=["webhooks"], route_class=CheckedRoute)

_ALL = "/{tenant_id}/webhooks"
_ONE = _ALL + "/{webhook_id}"
_TASK_SECRET = _ALL + "/task-secret"
_DELIVERY = "/{tenant_id}/webhook-deliveries/{delivery_id}"
Limit = Annotated[int, Query(ge=1, le=200, description="At most this many, newest first.")]
TaskFilter = Annotated[UUID | None, Query(description="Only this task's deliveries.")]


@router.post(
    _ALL,
    status_code=status.HTTP_201_CREATED,
    summary="Register a webhook endpoint",
    responses=problems(401, 403, 404, 422),
)
async def post_webhook(
    body: WebhookCreate,
    caller: RequireWebhookConfigure,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
) -> WebhookCreated:
    """The endpoint receives the events it names, each a POST in the Standard Webhooks format
    signed with its secret, which this answer shows once. Its URL must pass the SSRF guard
    (private and loopback addresses only where the tenant's or the operator's network
    allow-list admits them), now and at every delivery. Audited (`webhook.create`)."""
    record, secret = await webhooks.create(
        caller,
        tenant,
        url=body.url,
        events=body.events,
        description=body.description,
        enabled=body.enabled,
    )
    return WebhookCreated.with_secret(record, secret)


@router.get(
    _ALL, summary="List a tenant's webhook endpoints", responses=problems(401, 403, 404, 422)
)
async def get_webhooks(tenant: TenantForWebhookConfigure, webhooks: TenantWebhooks) -> WebhookList:
    """Oldest first; secrets are never shown again."""
    return WebhookList.of(await webhooks.endpoints(tenant))


@router.get(
    _TASK_SECRET,
    summary="Read the secret of tasks' one-off webhooks",
    responses=problems(401, 403, 404, 422),
)
async def get_task_secret(
    tenant: TenantForWebhookConfigure, webhooks: TenantWebhooks
) -> TaskSecretOut:
    """What signs the deliveries to a task's own `webhook_url`: one secret per tenant, made on
    first use."""
    secret, at = await webhooks.task_secret(tenant)
    return TaskSecretOut(secret=secret, updated_at=at)


@router.post(
    _TASK_SECRET + "/rotate",
    summary="Replace the secret of tasks' one-off webhooks",
    responses=problems(401, 403, 404, 422),
)
async def post_task_secret_rotation(
    caller: RequireWebhookConfigure, tenant: TenantForWebhookConfigure, webhooks: TenantWebhooks
) -> TaskSecretOut:
    """Deliveries from now on are signed with the new secret. Audited."""
    secret, at = await webhooks.rotate_task_secret(caller, tenant)
    return TaskSecretOut(secret=secret, updated_at=at)


@router.get(_ONE, summary="Read a webhook endpoint", responses=problems(401, 403, 404, 422))
async def get_webhook(
    webhook_id: UUID, tenant: TenantForWebhookConfigure, webhooks: TenantWebhooks
) -> WebhookOut:
    return WebhookOut.of(await webhooks.endpoint(tenant, webhook_id))


@router.patch(_ONE, summary="Change a webhook endpoint", responses=problems(401, 403, 404, 422))
async def patch_webhook(
    webhook_id: UUID,
    body: WebhookUpdate,
    caller: RequireWebhookConfigure,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
) -> WebhookOut:
    """Changes the fields given; `enabled: false` pauses it: runs make no new deliveries to
    it, and those stored wait until it is enabled again. Audited (`webhook.update`)."""
    return WebhookOut.of(await webhooks.update(caller, tenant, webhook_id, body.changes()))


@router.delete(
    _ONE,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a webhook endpoint",
    responses=problems(401, 403, 404, 422),
)
async def delete_one(
    webhook_id: UUID,
    caller: RequireWebhookConfigure,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
) -> Response:
    """Its deliveries go with it. Audited (`webhook.delete`)."""
    await webhooks.delete(caller, tenant, webhook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    _ONE + "/rotate-secret",
    summary="Replace a webhook endpoint's secret",
    responses=problems(401, 403, 404, 422),
)
async def post_rotation(
    webhook_id: UUID,
    caller: RequireWebhookConfigure,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
) -> WebhookCreated:
    """The new secret, shown this once; attempts from now on are signed with it. Audited."""
    record, secret = await webhooks.rotate_secret(caller, tenant, webhook_id)
    return WebhookCreated.with_secret(record, secret)


@router.get(
    _ONE + "/deliveries",
    summary="List a webhook endpoint's deliveries",
    responses=problems(401, 403, 404, 422),
)
async def get_endpoint_deliveries(
    webhook_id: UUID,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
    task_id: TaskFilter = None,
    limit: Limit = 50,
) -> DeliveryList:
    """Newest first, each with its status and how its last attempt went."""
    records = await webhooks.deliveries(
        tenant, webhook_id=webhook_id, task_id=task_id, one_off=False, limit=limit
    )
    return DeliveryList.of(records)


@router.get(
    "/{tenant_id}/webhook-deliveries",
    summary="List a tenant's webhook deliveries",
    responses=problems(401, 403, 404, 422),
)
async def get_deliveries(
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
    task_id: TaskFilter = None,
    one_off: Annotated[bool, Query(description="Only those to tasks' own `webhook_url`.")] = False,
    limit: Limit = 50,
) -> DeliveryList:
    """Every endpoint's and tasks' one-off ones, newest first."""
    records = await webhooks.deliveries(
        tenant, webhook_id=None, task_id=task_id, one_off=one_off, limit=limit
    )
    return DeliveryList.of(records)


@router.get(_DELIVERY, summary="Read a webhook delivery", responses=problems(401, 403, 404, 422))
async def get_delivery(
    delivery_id: UUID, tenant: TenantForWebhookConfigure, webhooks: TenantWebhooks
) -> DeliveryDetail:
    """With every attempt: when, how long, the receiver's status and the start of its answer,
    or why it failed."""
    return DeliveryDetail.with_attempts(*await webhooks.delivery(tenant, delivery_id))


@router.post(
    _DELIVERY + "/redeliver",
    summary="Send a webhook delivery again",
    responses=problems(401, 403, 404, 422),
)
async def post_redelivery(
    delivery_id: UUID,
    caller: RequireWebhookConfigure,
    tenant: TenantForWebhookConfigure,
    webhooks: TenantWebhooks,
) -> DeliveryOut:
    """Due again now, with the same `webhook-id` (receivers deduplicate by it), and retried
    for another day should it fail. Audited (`webhook.redeliver`)."""
    return DeliveryOut.of(await webhooks.redeliver(caller, tenant, delivery_id))
