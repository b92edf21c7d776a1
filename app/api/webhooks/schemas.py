"""Webhook endpoints, deliveries and attempts as clients register and see them."""

import json
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from app.resources.webhooks import AttemptRecord, DeliveryRecord, EndpointRecord
from app.resources.webhooks.urls import WebhookUrl

EventType = Literal[
    "task.completed", "task.failed", "task.incomplete", "task.input_required", "budget.warning"
]


def _once_each(events: list[EventType]) -> list[EventType]:
    if len(set(events)) != len(events):
        raise ValueError("lists an event type twice")
    return events


Events = Annotated[
    list[EventType],
    Field(
        min_length=1,
        max_length=5,
        description="What it receives: `task.completed`, `task.failed` (failed or cancelled: "
        "`data.status` says which), `task.incomplete` (stopped by a limit, answered from what "
        "it had), `task.input_required` (waits for a human's approval), `budget.warning` (a "
        "budget 80 % used).",
    ),
    AfterValidator(_once_each),
]
Description = Annotated[str, StringConstraints(max_length=500)]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/omniforge",
                    "events": ["task.completed", "task.failed"],
                    "description": "CRM sync",
                }
            ]
        },
    )

    url: WebhookUrl
    events: Events
    description: Description | None = None
    enabled: bool = True


class WebhookUpdate(BaseModel):
    """The fields to change; `enabled: false` pauses the endpoint (no new deliveries; those
    stored wait until it is enabled again)."""

    model_config = ConfigDict(extra="forbid")

    url: WebhookUrl | None = None
    events: Events | None = None
    description: Description | None = None
    enabled: bool | None = None

    def changes(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in self.model_fields_set
            if getattr(self, name) is not None or name == "description"
        }


class WebhookOut(BaseModel):
    id: UUID
    url: str
    description: str | None
    events: list[str]
    enabled: bool
    created_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: EndpointRecord) -> "WebhookOut":
        return cls.model_validate(record.model_dump())


class WebhookCreated(WebhookOut):
    secret: str = Field(
        description="The signing secret (`whsec_…`), shown this once: deliveries carry "
        "`webhook-id`, `webhook-timestamp` and `webhook-signature` (Standard Webhooks, "
        "HMAC-SHA256), which any Standard Webhooks library verifies with it."
    )

    @classmethod
    def with_secret(cls, record: EndpointRecord, secret: str) -> "WebhookCreated":
        return cls(**WebhookOut.of(record).model_dump(), secret=secret)


class WebhookList(BaseModel):
    items: list[WebhookOut]

    @classmethod
    def of(cls, records: list[EndpointRecord]) -> "WebhookList":
        return cls(items=[WebhookOut.of(record) for record in records])


class TaskSecretOut(BaseModel):
    secret: str = Field(
        description="Signs the deliveries to tasks' one-off `webhook_url` (Standard Webhooks)."
    )
    updated_at: datetime


class AttemptOut(BaseModel):
    number: int
    url: str
    started_at: datetime
    duration_ms: int
    status_code: int | None = Field(description="The receiver's answer; null: none came.")
    error: str | None = Field(description="Why the attempt failed; null: it succeeded.")
    response: str | None = Field(description="The start of the receiver's answer.")

    @classmethod
    def of(cls, record: AttemptRecord) -> "AttemptOut":
        return cls.model_validate(record.model_dump())


class DeliveryOut(BaseModel):
    # By name too: a detail is made of its delivery's fields (`with_attempts`).
    model_config = ConfigDict(populate_by_name=True)

    id: UUID = Field(description="Also its `webhook-id` header, the same on every attempt.")
    webhook_id: UUID | None = Field(
        validation_alias="endpoint_id", description="Its endpoint; null: a task's `webhook_url`."
    )
    url: str | None = Field(description="A task's one-off `webhook_url`.")
    task_id: UUID | None
    event: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    payload: dict[str, Any] = Field(description="The body as sent.")

    @classmethod
    def of(cls, record: DeliveryRecord) -> "DeliveryOut":
        return cls.model_validate(
            {
                **record.model_dump(),
                "next_attempt_at": record.next_attempt_at if record.status == "pending" else None,
                "payload": json.loads(record.payload),
            }
        )


class DeliveryDetail(DeliveryOut):
    attempt_list: list[AttemptOut] = Field(description="Every attempt, first to last.")

    @classmethod
    def with_attempts(
        cls, record: DeliveryRecord, attempts: list[AttemptRecord]
    ) -> "DeliveryDetail":
        return cls(
            **DeliveryOut.of(record).model_dump(),
            attempt_list=[AttemptOut.of(attempt) for attempt in attempts],
        )


class DeliveryList(BaseModel):
    items: list[DeliveryOut]

    @classmethod
    def of(cls, records: list[DeliveryRecord]) -> "DeliveryList":
        return cls(items=[DeliveryOut.of(record) for record in records])
