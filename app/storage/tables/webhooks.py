"""A tenant's webhooks: its endpoints, the secret of its tasks' one-off URLs, the outbox of
deliveries and every attempt at one."""

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    Table,
    Text,
    Uuid,
    text,
)

from app.storage.tables.schema import NAME, SHORT, TENANT_ID, metadata
from app.storage.types import BigIntegerKey, JSONDocument, UTCDateTime

# A tenant's webhook endpoints: where its events are sent, signed with the endpoint's own
# secret (Standard Webhooks `whsec_…`), sealed like tenant secrets.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("url", Text, nullable=False),
    Column("description", Text),
    # The event types it receives (`task.completed`…).
    Column("events", JSONDocument, nullable=False),
    # A paused endpoint gets no new deliveries; those stored wait until it is enabled again.
    Column("enabled", Boolean, nullable=False),
    Column("key_id", SHORT, nullable=False),
    Column("sealed_secret", Text, nullable=False),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_webhook_endpoints_tenant_created", "tenant_id", "created_at", "id"),
)


# The secret that signs deliveries to the one-off `webhook_url` of a tenant's tasks, made on
# first use and readable by the tenant's admins.
webhook_task_secrets = Table(
    "webhook_task_secrets",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    Column("key_id", SHORT, nullable=False),
    Column("sealed_secret", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)


PENDING_DELIVERY = "status = 'pending'"

# The outbox: one row per event and destination, stored in the transaction of the change that
# caused it, then sent (and retried) by whichever instance claims it. No foreign key to the
# endpoint: a run may still name an endpoint deleted after it started (such rows are never
# sent).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    # NULL: sent to `url`, a task's one-off `webhook_url`.
    Column("endpoint_id", Uuid),
    Column("url", Text),
    Column("task_id", Uuid),
    Column("event", SHORT, nullable=False),
    # The body exactly as sent (and signed), the same on every attempt.
    Column("payload", Text, nullable=False),
    # pending, delivered, failed.
    Column("status", SHORT, nullable=False),
    Column("attempts", Integer, nullable=False),
    # When it is next due: its next try, or the end of the claim of the instance sending it.
    Column("next_attempt_at", UTCDateTime),
    # Past this, a failed attempt is the last one; NULL: the retry window after `created_at`.
    Column("give_up_at", UTCDateTime),
    Column("last_status_code", Integer),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    Index("ix_webhook_deliveries_tenant_endpoint", "tenant_id", "endpoint_id", "created_at", "id"),
    Index("ix_webhook_deliveries_task", "task_id"),
    Index(
        "ix_webhook_deliveries_due",
        "next_attempt_at",
        postgresql_where=text(PENDING_DELIVERY),
        sqlite_where=text(PENDING_DELIVERY),
    ),
)


# Every attempt to send a delivery, as it went.
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column(
        "delivery_id",
        Uuid,
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("number", Integer, nullable=False),
    Column("url", Text, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    # The start of the receiver's answer.
    Column("response", Text),
    Index("ix_webhook_attempts_delivery", "delivery_id", "id"),
)
