"""API keys as clients send and see them: the secret is shown once, at creation."""

from datetime import datetime
from typing import Literal, Self
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.query import Instant
from app.chain.models import utc_now
from app.governance.quotas import TenantQuotas
from app.security.rbac import Role
from app.storage.records import ApiKeyRecord

KeyStatus = Literal["active", "expired", "revoked"]


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "ci-pipeline",
                    "roles": ["member"],
                    "expires_at": "2027-06-30T00:00:00Z",
                    "quotas": {"submissions_per_minute": 30, "cost_per_day_usd": "5"},
                }
            ]
        },
    )

    name: str = Field(min_length=1, max_length=100, description="What the key is for.")
    roles: list[Role] = Field(
        min_length=1,
        max_length=len(Role),
        description="Its roles: together at most the permissions of the caller's roles.",
    )
    expires_at: Instant | None = Field(
        default=None,
        description="When it stops working, with a time zone (read in UTC, years 1 to 9999); "
        "none: until revoked.",
    )
    quotas: TenantQuotas | None = Field(
        default=None,
        description="Its own limits, on top of the tenant's (same fields as the tenant's "
        "quotas except `concurrent_runs`): rates, token and cost windows — e.g. "
        "`cost_per_day_usd` as the key's daily budget — and `default_budget` for its tasks.",
    )

    @field_validator("name")
    @classmethod
    def _stripped(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the name is blank")
        return value.strip()

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value <= utc_now():
            raise ValueError("the expiry is in the past")
        return value

    @model_validator(mode="after")
    def _no_concurrency_per_key(self) -> Self:
        if self.quotas is not None and self.quotas.concurrent_runs is not None:
            raise ValueError("`quotas.concurrent_runs` is the tenant's alone; a key has none")
        return self


class ApiKeyOut(BaseModel):
    """A key as listed: never its secret; `prefix` is the part that names it (also in the
    audit log, as the actor `api-key:<prefix>`)."""

    id: UUID
    name: str
    prefix: str
    roles: list[str]
    quotas: TenantQuotas | None
    status: KeyStatus
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="To the minute.")
    revoked_at: datetime | None
    revoked_by: str | None

    @classmethod
    def of(cls, record: ApiKeyRecord) -> Self:
        status: KeyStatus = "active"
        if record.revoked_at is not None:
            status = "revoked"
        elif not record.usable_at(utc_now()):
            status = "expired"
        return cls.model_validate({**record.model_dump(), "status": status})


class ApiKeyCreated(ApiKeyOut):
    secret: str = Field(
        description="The key itself (`omf_…`), for `Authorization: Bearer`. Shown only now: "
        "only its SHA-256 is stored."
    )


class ApiKeyPage(BaseModel):
    items: list[ApiKeyOut]
    next_cursor: str | None = None
