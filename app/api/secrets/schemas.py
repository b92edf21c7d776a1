"""Tenant secrets as clients send and see them: a value goes in, never out."""

from datetime import datetime
from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.storage.secrets import SecretRecord

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


class SecretValue(BaseModel):
    """A secret's value: stored sealed, never shown again by any route."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"value": "ghp_example-token"}]}
    )

    value: str = Field(
        min_length=1,
        max_length=MAX_SECRET_BYTES,
        description=f"At most {MAX_SECRET_BYTES} bytes (UTF-8).",
    )

    @field_validator("value")
    @classmethod
    def _at_most_max_bytes(cls, value: str) -> str:
        if len(value.encode()) > MAX_SECRET_BYTES:
            raise ValueError(f"the value is longer than {MAX_SECRET_BYTES} bytes")
        return value


class SecretOut(BaseModel):
    """A secret as shown: its name and who set it when; never its value."""

    name: str
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
