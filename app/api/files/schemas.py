"""Files as clients see them."""

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.storage.pagination import Page
from app.storage.records import FileRecord, FileVisibility

VISIBILITY = (
    "Who may read it: `private`, its uploader alone (and those who manage the tenant's files: "
    "`file:manage`); `tenant`, every member, and every member's runs."
)


class FileOut(BaseModel):
    """An uploaded file. `media_type` is what its bytes are (sniffed), whatever the client
    said: `application/pdf`, `image/png|jpeg|gif|webp|bmp|tiff`, `text/plain` (UTF-8), else
    `application/octet-stream`."""

    id: UUID
    name: str = Field(description="The uploaded file's name, without any path.")
    media_type: str
    size_bytes: int
    sha256: str = Field(description="Hex SHA-256 of the bytes.")
    pages: int | None = Field(default=None, description="PDFs: their page count.")
    width: int | None = Field(default=None, description="Images: width in pixels.")
    height: int | None = Field(default=None, description="Images: height in pixels.")
    text_chars: int | None = Field(
        default=None,
        description="Characters of text extracted for reading and search (text and PDF "
        "files); null: the file has no text.",
    )
    created_by: str
    created_at: datetime
    visibility: FileVisibility = Field(description=VISIBILITY)

    @classmethod
    def of(cls, record: FileRecord) -> "FileOut":
        return cls.model_validate(record.model_dump(exclude={"tenant_id"}))


class FilePage(BaseModel):
    items: list[FileOut]
    next_cursor: str | None

    @classmethod
    def of(cls, page: Page[FileRecord]) -> "FilePage":
        return cls(items=[FileOut.of(item) for item in page.items], next_cursor=page.next_cursor)


class FileChange(BaseModel):
    """A change of a file: whom it is shared with."""

    model_config = ConfigDict(extra="forbid")

    visibility: FileVisibility = Field(description=VISIBILITY)
