"""Tenant resources as clients see and send them."""

import ipaddress
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from app.config import MAX_RETENTION_DAYS
from app.runs.models import ToolName
from app.storage.records import AuditRecord, TenantRecord

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
TenantId = Annotated[str, Field(pattern=TENANT_ID_PATTERN)]
TenantStatus = Literal["active", "disabled"]


class TenantCreate(BaseModel):
    """A new tenant. `id` is what tokens carry in their tenant claim."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"id": "acme", "name": "Acme Corp."}]},
    )

    id: TenantId
    name: str = Field(min_length=1, max_length=255)
    enabled_tools: list[ToolName] | None = Field(
        default=None, max_length=256, description="Tools its runs may use (default: all)."
    )


class TenantUpdate(BaseModel):
    """Fields to change; a disabled tenant's tokens are refused with 403."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=255)
    status: TenantStatus | None = None


class TenantOut(BaseModel):
    id: str
    name: str
    status: str
    enabled_tools: list[str] | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: TenantRecord) -> "TenantOut":
        return cls.model_validate(record, from_attributes=True)


class TenantPage(BaseModel):
    items: list[TenantOut]
    next_cursor: str | None


class ToolSettings(BaseModel):
    """The tools a tenant's runs may use; `null`: every registered tool."""

    model_config = ConfigDict(extra="forbid")

    enabled_tools: list[ToolName] | None = Field(max_length=256)


def _network_entry(entry: str) -> str:
    if "/" in entry:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ValueError(f"{entry!r} is not a CIDR: {exc}") from None
    return entry.lower()


NetworkEntry = Annotated[
    str,
    AfterValidator(_network_entry),
    Field(
        min_length=1,
        max_length=255,
        pattern=r"^(\*\.)?[A-Za-z0-9._:-]+(/[0-9]{1,3})?$",
        description="A host name (`api.internal`), a wildcard (`*.corp.example`), an address "
        "or a CIDR (`10.1.0.0/16`, `fd00::/8`).",
    ),
]


class NetworkSettings(BaseModel):
    """Where a tenant's HTTP tools (`web_fetch`, `http_request`) and MCP servers may go past the
    SSRF guard, besides the operator's `OMNIFORGE_NETWORK_ALLOW`. `http_request` reaches only
    hosts listed here (or there); `web_fetch` reaches any public address, and these private ones."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"allow": ["api.internal.example", "10.20.0.0/16"]}]},
    )

    allow: list[NetworkEntry] = Field(default_factory=list, max_length=256)

    @field_validator("allow")
    @classmethod
    def _once_each(cls, entries: list[str]) -> list[str]:
        return list(dict.fromkeys(entries))


class AuditEventOut(BaseModel):
    id: int
    actor: str
    action: str
    resource_type: str
    resource_id: str | None
    details: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, record: AuditRecord) -> "AuditEventOut":
        return cls.model_validate(record, from_attributes=True)


class AuditPage(BaseModel):
    items: list[AuditEventOut]
    next_cursor: str | None


RetentionDays = Annotated[int, Field(ge=1, le=MAX_RETENTION_DAYS)]


class RetentionSettings(BaseModel):
    """How long a tenant's data is kept, in days; `null`: the platform's default."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"retention_days": 30, "audit_retention_days": 730}]},
    )

    retention_days: RetentionDays | None = Field(
        default=None,
        description="Finished tasks (chains, steps, events, costs), conversations after their "
        "last activity, and uploaded files older than this are deleted by the daily purge. "
        "The daily usage roll-up and the deleted tasks' daily cost sums stay.",
    )
    audit_retention_days: RetentionDays | None = Field(
        default=None, description="Audit events older than this are deleted by the purge."
    )


class RetentionOut(RetentionSettings):
    """The tenant's settings and the periods that apply (its own, else the platform's)."""

    effective_retention_days: int
    effective_audit_retention_days: int
