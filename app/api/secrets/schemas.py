"""Tenant secrets as clients send and see them: a value goes in, never out."""

from datetime import datetime
from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.query import encode_key_cursor
from app.resources.secrets import UNCHANGED, SecretRecord, Unchanged, UsableBy

SECRET_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
MAX_SECRET_BYTES = 16 * 1024

SecretName = Annotated[
    str,
    Path(
        pattern=SECRET_NAME_PATTERN,
        description="A letter, then up to 63 letters, digits or underscores.",
        examples=["GITHUB_TOKEN"],
    ),
]


USABLE_BY_DESCRIPTION = (
    "Who may use the secret: runs of these `agents`, of callers holding one of these `roles`, "
    "sent by these `tools` (taking it by name, e.g. `http_request`), `mcp_servers` or "
    "`remote_agents` (whose headers name it). An empty or absent list allows any; null (or "
    "absent when the secret is created): every agent, tool and role of the tenant."
)


class SecretValue(BaseModel):
    """A secret's value: stored sealed, never shown again by any route; and who may use it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "value": "ghp_example-token",
                    "usable_by": {"mcp_servers": ["github"], "roles": ["tenant_admin", "member"]},
                }
            ]
        },
    )

    value: str = Field(
        min_length=1,
        max_length=MAX_SECRET_BYTES,
        description=f"At most {MAX_SECRET_BYTES} bytes (UTF-8).",
    )
    usable_by: UsableBy | None = Field(
        default=None,
        description=USABLE_BY_DESCRIPTION + " Absent when the value of an existing secret is "
        "replaced: its scope is kept.",
    )

    def scope(self) -> UsableBy | Unchanged | None:
        """Who may use the secret, as given; `UNCHANGED` when absent."""
        return self.usable_by if "usable_by" in self.model_fields_set else UNCHANGED

    @field_validator("value")
    @classmethod
    def _at_most_max_bytes(cls, value: str) -> str:
        if len(value.encode()) > MAX_SECRET_BYTES:
            raise ValueError(f"the value is longer than {MAX_SECRET_BYTES} bytes")
        return value


class SecretScope(BaseModel):
    """Who may use a secret, changed without its value."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"usable_by": {"agents": ["support"], "roles": []}}]},
    )

    usable_by: UsableBy | None = Field(description=USABLE_BY_DESCRIPTION)


class SecretOut(BaseModel):
    """A secret as shown: its name and who set it when; never its value."""

    name: str
    usable_by: UsableBy | None = Field(description="Who may use it; null: anyone of the tenant.")
    created_at: datetime
    updated_at: datetime
    created_by: str
    updated_by: str

    @classmethod
    def of(cls, record: SecretRecord) -> "SecretOut":
        return cls.model_validate(record, from_attributes=True)


class SecretPage(BaseModel):
    items: list[SecretOut]
    next_cursor: str | None

    @classmethod
    def of(cls, records: list[SecretRecord], limit: int) -> "SecretPage":
        """The page of at most `limit + 1` records (the extra one says there is more)."""
        items = [SecretOut.of(record) for record in records[:limit]]
        more = len(records) > limit
        return cls(items=items, next_cursor=encode_key_cursor(items[-1].name) if more else None)
