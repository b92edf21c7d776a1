"""The webhook outbox: delivery rows made in the transaction of the change they announce, and
the claims and outcomes of the instances that send them.

A delivery is due when `status` is pending and `next_attempt_at` has come. Claiming one moves
`next_attempt_at` to the end of the claim: should the claiming instance die, the delivery is
due again then, and another instance (or this one restarted) sends it."""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import and_, exists, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain import ChainMetrics, TaskState, format_usd
from app.ids import uuid4
from app.storage.tables import (
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_task_secrets,
)
from app.storage.text import storable_json

TASK_COMPLETED = "task.completed"
TASK_FAILED = "task.failed"
TASK_INCOMPLETE = "task.incomplete"
TASK_INPUT_REQUIRED = "task.input_required"
BUDGET_WARNING = "budget.warning"
WEBHOOK_EVENTS = (TASK_COMPLETED, TASK_FAILED, TASK_INCOMPLETE, TASK_INPUT_REQUIRED, BUDGET_WARNING)
"""Every event type an endpoint may subscribe to."""

EVENT_OF_STATE: dict[TaskState, str] = {
    TaskState.COMPLETED: TASK_COMPLETED,
    TaskState.INCOMPLETE: TASK_INCOMPLETE,
    TaskState.FAILED: TASK_FAILED,
    # Ended without an answer as well: `data.status` says it was cancelled.
    TaskState.CANCELLED: TASK_FAILED,
    TaskState.INPUT_REQUIRED: TASK_INPUT_REQUIRED,
}

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


def usage_of(metrics: ChainMetrics) -> dict[str, Any]:
    """A run's usage as a delivery reports it: tokens, calls and cost, a decimal string
    written as the REST API writes money (`format_usd`), so both say the same amount alike."""
    return {
        "input_tokens": metrics.input_tokens,
        "output_tokens": metrics.output_tokens,
        "total_tokens": metrics.total_tokens,
        "llm_calls": metrics.llm_calls,
        "tool_calls": metrics.tool_calls,
        "cost_usd": format_usd(metrics.total_cost_usd),
        "unpriced_calls": metrics.unpriced_calls,
    }


def payload_of(event: str, at: datetime, data: Mapping[str, Any]) -> str:
    """A delivery's body: `{type, timestamp, data}` as JSON text, signed and sent as is."""
    stamp = at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    document = {"type": event, "timestamp": stamp, "data": dict(data)}
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)
    return storable_json(text)


def delivery_rows(
    tenant_id: str,
    task_id: UUID | None,
    event: str,
    data: Mapping[str, Any],
    *,
    endpoints: Iterable[UUID],
    url: str | None,
    at: datetime,
) -> list[dict[str, Any]]:
    """The outbox rows of one event: one per endpoint, and one for a task's own `url`."""
    payload = payload_of(event, at, data)
    targets: list[tuple[UUID | None, str | None]] = [(endpoint, None) for endpoint in endpoints]
    if url is not None:
        targets.append((None, url))
    return [
        {
            "id": uuid4(),
            "tenant_id": tenant_id,
            "endpoint_id": endpoint,
            "url": target_url,
            "task_id": task_id,
            "event": event,
            "payload": payload,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
        }
        for endpoint, target_url in targets
    ]


async def stage_task_end(
    connection: AsyncConnection,
    *,
    tenant_id: str,
    task_id: UUID,
    chain_id: UUID,
    request: Mapping[str, Any],
    status: TaskState,
    error_code: str,
    message: str,
    metrics: ChainMetrics,
    at: datetime,
) -> bool:
    """Stores, in the caller's transaction, the deliveries of a task ended without a run (a
    cancel in the queue, a run that cannot go on): to the tenant's enabled endpoints that
    subscribe to its event and to its own `webhook_url`. True when there were any. A read
    of the endpoints on this rare path; runs use the cached subscriptions instead."""
    event = EVENT_OF_STATE.get(status)
    if event is None:
        return False
    e = webhook_endpoints.c
    rows = await connection.execute(
        select(e.id, e.events).where(e.tenant_id == tenant_id, e.enabled.is_(True))
    )
    endpoints = [row.id for row in rows if event in row.events]
    url = request.get("webhook_url")
    if not endpoints and url is None:
        return False
    data = {
        "task_id": str(task_id),
        "chain_id": str(chain_id),
        "status": str(status),
        "error": {"code": error_code, "message": message},
        "usage": usage_of(metrics),
    }
    deliveries = delivery_rows(tenant_id, task_id, event, data, endpoints=endpoints, url=url, at=at)
    await connection.execute(insert(webhook_deliveries), deliveries)
    return True


def _sendable() -> Any:
    """Deliveries whose endpoint is enabled (or that go to a task's own URL)."""
    d, e = webhook_deliveries.c, webhook_endpoints.c
    enabled = exists().where(e.id == d.endpoint_id, e.enabled.is_(True))
    return or_(d.endpoint_id.is_(None), enabled)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery this instance is to send now: `attempt` is this try's number."""

    id: UUID
    tenant_id: str
    endpoint_id: UUID | None
    url: str | None
    payload: str
    attempt: int
    # None: the retry window after `created_at`.
    give_up_at: datetime | None
    created_at: datetime


async def claim(
    connection: AsyncConnection, *, now: datetime, hold: timedelta, limit: int
) -> list[Claimed]:
    """Takes up to `limit` due deliveries for `hold` (Postgres: rows others are claiming are
    skipped, never waited for)."""
    if limit <= 0:
        return []
    d = webhook_deliveries.c
    due = and_(d.status == PENDING, d.next_attempt_at <= now)
    pick = (
        select(d.id)
        .where(due, _sendable())
        .order_by(d.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    result = await connection.execute(
        update(webhook_deliveries)
        .where(d.id.in_(pick.scalar_subquery()), due)
        .values(next_attempt_at=now + hold, attempts=d.attempts + 1)
        .returning(
            d.id,
            d.tenant_id,
            d.endpoint_id,
            d.url,
            d.payload,
            d.attempts,
            d.give_up_at,
            d.created_at,
        )
    )
    return [Claimed(*row) for row in result.all()]


async def next_due(connection: AsyncConnection) -> datetime | None:
    """When the first pending delivery that may be sent is due."""
    d = webhook_deliveries.c
    statement = select(func.min(d.next_attempt_at)).where(d.status == PENDING, _sendable())
    at: datetime | None = await connection.scalar(statement)
    return at


async def record_attempt(
    connection: AsyncConnection,
    claimed: Claimed,
    attempt: Mapping[str, Any],
    *,
    status: str,
    next_attempt_at: datetime | None,
) -> None:
    """An attempt as it went, and what follows it: delivered, failed for good, or a retry at
    `next_attempt_at`."""
    await connection.execute(
        insert(webhook_attempts).values(
            delivery_id=claimed.id, tenant_id=claimed.tenant_id, number=claimed.attempt, **attempt
        )
    )
    delivered = attempt["started_at"] if status == DELIVERED else None
    await connection.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.id == claimed.id)
        .values(
            status=status,
            next_attempt_at=next_attempt_at,
            last_status_code=attempt.get("status_code"),
            last_error=attempt.get("error"),
            delivered_at=delivered,
        )
    )


async def endpoint_target(
    connection: AsyncConnection, tenant_id: str, endpoint_id: UUID
) -> tuple[str, str, str] | None:
    """An endpoint's URL and sealed secret (key id, text); None when it is gone."""
    e = webhook_endpoints.c
    row = (
        await connection.execute(
            select(e.url, e.key_id, e.sealed_secret).where(
                e.tenant_id == tenant_id, e.id == endpoint_id
            )
        )
    ).first()
    return None if row is None else (row[0], row[1], row[2])


async def task_secret(connection: AsyncConnection, tenant_id: str) -> tuple[str, str] | None:
    """The sealed secret of the tenant's one-off task webhooks (key id, text), if made yet."""
    s = webhook_task_secrets.c
    row = (
        await connection.execute(select(s.key_id, s.sealed_secret).where(s.tenant_id == tenant_id))
    ).first()
    return None if row is None else (row[0], row[1])
