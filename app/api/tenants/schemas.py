"""Tenant resources as clients see and send them."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
