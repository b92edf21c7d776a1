"""A tenant's uploaded files: what was sniffed from them, their text in searchable chunks,
and their bytes when the database keeps them."""

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    Uuid,
    text,
)

from app.storage.tables.schema import NAME, TENANT_ID, metadata
from app.storage.types import BigIntegerKey, UTCDateTime

# A tenant's uploaded files: what was sniffed from their bytes (never what the client claimed).
# The bytes themselves are kept by a `FileStore` under the file's id (`file_blobs`, or a
# directory).
files = Table(
    "files",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant_id", TENANT_ID, nullable=False),
    Column("name", NAME, nullable=False),
    Column("media_type", String(127), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
    # PDFs: their page count; images: their size in pixels.
    Column("pages", Integer),
    Column("width", Integer),
    Column("height", Integer),
    # Characters of text extracted for reading and search; NULL: the file has none.
    Column("text_chars", Integer),
    Column("created_by", NAME, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # Who may read it: `private`, its uploader (and those who manage the tenant's files);
    # `tenant`, every member. Files stored before it was kept are the tenant's.
    Column("visibility", String(16), nullable=False, server_default=text("'tenant'")),
    Index("ix_files_tenant_created", "tenant_id", "created_at", "id"),
)


# Files' extracted text in chunks, in order: a PDF's pages (a long page in several chunks), a
# text file's text cut at line ends. Full-text search runs over these rows with the database's
# own engine; its objects are made by the migration per backend (`SEARCH_OBJECTS`).
file_texts = Table(
    "file_texts",
    metadata,
    Column("id", BigIntegerKey, primary_key=True, autoincrement=True),
    Column("file_id", Uuid, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("tenant_id", TENANT_ID, nullable=False),
    # The PDF page (from 1) the chunk is from; NULL for text files.
    Column("page", Integer),
    Column("text", Text, nullable=False),
    Index("ix_file_texts_file", "file_id", "id"),
)


# Files' bytes when the database keeps them (`DatabaseFileStore`).
file_blobs = Table(
    "file_blobs",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)


# The search objects the migration makes outside these definitions: on SQLite an FTS5 table
# (with its shadow tables), on Postgres a generated `tsvector` column of `file_texts` with a
# GIN index. Comparisons of these definitions with a database leave them out (`described`).
FILE_SEARCH_TABLE = "file_texts_fts"
FILE_SEARCH_COLUMN = "search_vector"
FILE_SEARCH_INDEX = "ix_file_texts_search"


def described(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether a database object is one these definitions describe: false for the search
    objects above (an Alembic `include_name` hook)."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(FILE_SEARCH_TABLE)
    if type_ == "column":
        return name != FILE_SEARCH_COLUMN
    return not (type_ == "index" and name == FILE_SEARCH_INDEX)
