"""Tenant resources as clients see and send them."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.config import MAX_RETENTION_DAYS
from app.runs.models import ToolName
from app.storage.records import AuditRecord, NetworkAllow, TenantRecord
from app.tools.net.policy import parse_entry, platform_refusal, tenant_refusal

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


def _tenant_entry(text: str) -> str:
    entry = parse_entry(text)
    refusal = tenant_refusal(entry)
    if refusal is not None:
        raise ValueError(refusal)
    return entry.text


def _platform_entry(text: str) -> str:
    entry = parse_entry(text)
    refusal = platform_refusal(entry)
    if refusal is not None:
        raise ValueError(refusal)
    return entry.text


TenantNetworkEntry = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        description="A host name (`api.example.com`), a wildcard (`*.corp.example`), or a "
        "public address or network (`8.8.8.0/24`). No ports, and nothing that overlaps "
        "loopback, private, link-local, shared, reserved or other special-purpose ranges "
        "(`0.0.0.0/0`, `::/0`, `10.0.0.0/8`, `64:ff9b::/96`…).",
    ),
    AfterValidator(_tenant_entry),
]
PlatformNetworkEntry = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        description="A host name or wildcard, an address or CIDR of any range (`10.20.0.0/16`, "
        "`127.0.0.1`, `fd00::/8`), or an address with a port (`127.0.0.1:8000`, "
        "`[::1]:8000`): that port alone, the only way to open the service's own port. Cloud "
        "metadata endpoints are opened by nothing.",
    ),
    AfterValidator(_platform_entry),
]


def _once_each(entries: list[str]) -> list[str]:
    return list(dict.fromkeys(entries))


class NetworkSettings(BaseModel):
    """Where a tenant's HTTP tools (`web_fetch`, `http_request`), MCP servers, remote agents
    and webhooks may go past the SSRF guard, besides the operator's `OMNIFORGE_NETWORK_ALLOW`.
    `allow` is the tenant's own list: host names `http_request` may call, and public networks.
    `platform_allow` is the platform's allowance for this tenant (loopback, private ranges,
    single ports): set by platform admins only; a tenant admin sees it and may send it back
    unchanged. Either list left out (or `null`) stays as it is."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"allow": ["api.example.com", "*.corp.example"]},
                {"allow": ["api.example.com"], "platform_allow": ["10.20.0.0/16"]},
            ]
        },
    )

    allow: Annotated[list[TenantNetworkEntry], AfterValidator(_once_each)] | None = Field(
        default=None, max_length=256
    )
    platform_allow: Annotated[list[PlatformNetworkEntry], AfterValidator(_once_each)] | None = (
        Field(default=None, max_length=256)
    )


class NetworkOut(BaseModel):
    """A tenant's network allow-lists: its own and the platform's allowance for it."""

    allow: list[str]
    platform_allow: list[str]

    @classmethod
    def of(cls, document: Any) -> "NetworkOut":
        lists = NetworkAllow.of(document)
        return cls(allow=list(lists.allow), platform_allow=list(lists.platform_allow))


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

    @classmethod
    def of(cls, record: TenantRecord, periods: tuple[int, int]) -> "RetentionOut":
        days, audit_days = periods
        return cls(
            retention_days=record.retention_days,
            audit_retention_days=record.audit_retention_days,
            effective_retention_days=days,
            effective_audit_retention_days=audit_days,
        )
