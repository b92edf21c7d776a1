"""A tenant's files: what an upload is (sniffed from its bytes, never the client's word), its
text extracted once for reading and search, its bytes kept by a `FileStore`; and the files as
one run's tools see them (`FileAccess`)."""

import asyncio
import hashlib
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from PIL import Image
from sqlalchemy.ext.asyncio import AsyncConnection

from app.chain.models import utc_now
from app.config import Settings
from app.governance.audit import AuditAction, audit_row
from app.ids import uuid4
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.files import (
    DatabaseFileStore,
    DirectoryFileStore,
    FileRepository,
    FileStore,
)
from app.storage.pagination import Cursor, Page
from app.storage.records import FileRecord, FileTextRecord, FileVisibility
from app.tools import documents
from app.tools.services import FileAccess, FileInfo, FileMatch, not_found

logger = logging.getLogger(__name__)

PDF = "application/pdf"
TEXT = "text/plain"
BINARY = "application/octet-stream"
# The image formats recognised (by Pillow, from their bytes) and their media types; the
# format list also keeps Pillow from taking text for one of its looser formats.
IMAGE_TYPES = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
}
# Text is stored in chunks of at most this many characters (Postgres caps one tsvector at
# 1 MB, and a headline's cost grows with its chunk), and at most this much of a file.
CHUNK_CHARS = 32_000
MAX_TEXT_CHARS = 5_000_000
# How a PDF's pages are told apart in `FileAccess.text`.
PAGE_BREAK = "\f"


@dataclass(frozen=True, slots=True)
class Described:
    """What a file's bytes turned out to be, and its text in chunks."""

    media_type: str
    pages: int | None = None
    width: int | None = None
    height: int | None = None
    chunks: list[FileTextRecord] = field(default_factory=list)
    has_text: bool = False

    @property
    def text_chars(self) -> int | None:
        return sum(len(chunk.text) for chunk in self.chunks) if self.has_text else None


def describe(data: bytes) -> Described:
    """Sniffs `data`: a PDF by its magic bytes (text per page, read in another process within
    the document limits: `DocumentRefused` past them), an image by Pillow (format and size;
    the pixels are not decoded), text if it is UTF-8 without NUL, else binary. CPU-bound or
    waiting: run it in a thread."""
    if data.startswith(b"%PDF-"):
        return _pdf(data)
    image = _image(data)
    if image is not None:
        return image
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Described(BINARY)
    if "\x00" in text:
        return Described(BINARY)
    text = text.removeprefix("\ufeff")[:MAX_TEXT_CHARS]
    return Described(
        TEXT, chunks=[FileTextRecord(page=None, text=c) for c in chunked(text)], has_text=True
    )


def _pdf(data: bytes) -> Described:
    """Read in another process, within the document limits (`DocumentRefused` past them)."""
    read = documents.current().read_pdf(data, stop_chars=MAX_TEXT_CHARS)
    if read.unreadable is not None:
        logger.info("a PDF could not be read: %s", read.unreadable)
        return Described(PDF)
    for failure in read.failures:
        logger.info("a PDF has no readable text on %s", failure)
    chunks: list[FileTextRecord] = []
    total = 0
    for number, page_text in enumerate(read.texts, start=1):
        text = page_text.replace(PAGE_BREAK, "\n").replace("\x00", "").strip()
        text = text[: max(MAX_TEXT_CHARS - total, 0)]
        total += len(text)
        chunks.extend(FileTextRecord(page=number, text=c) for c in chunked(text) or [""])
    return Described(PDF, pages=read.pages, chunks=chunks, has_text=True)


def _image(data: bytes) -> Described | None:
    try:
        with Image.open(io.BytesIO(data), formats=list(IMAGE_TYPES)) as image:
            media_type = IMAGE_TYPES[str(image.format)]
            width, height = image.size
    except Exception:
        # Not an image (UnidentifiedImageError), one too large to handle safely (a
        # decompression bomb), or a header Pillow knows but cannot parse: not an image here.
        return None
    return Described(media_type, width=width, height=height)


def chunked(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """`text` in pieces of at most `size` characters, cut after a line end where there is one
    in the second half of a piece; joined, they are `text` again."""
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + size // 2, end)
            if cut != -1:
                end = cut + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def clean_name(name: str | None) -> str:
    """A client's file name as stored: its last path part, without control characters, at most
    255 characters; `upload` when nothing is left."""
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(char for char in name if char.isprintable()).strip()
    return name[:255] or "upload"


class FileLibrary:
    """Every tenant's files: uploads (sniffed, their text extracted, audited), reads, deletes,
    and `access(tenant_id, attached)` for one run's tools. `store` keeps the bytes."""

    def __init__(self, database: Database, store: FileStore) -> None:
        self.database = database
        self.store = store

    @classmethod
    def from_settings(cls, database: Database, settings: Settings) -> "FileLibrary":
        """Bytes in `settings.files_dir` when set, else in the database."""
        if settings.files_dir is not None:
            return cls(database, DirectoryFileStore(settings.files_dir))
        return cls(database, DatabaseFileStore(database))

    async def upload(
        self,
        tenant_id: str,
        name: str | None,
        data: bytes,
        *,
        by: str,
        visibility: FileVisibility = "private",
    ) -> FileRecord:
        """Stores a new file of the tenant and its audit event (`file.upload`): `private`
        (its uploader's alone) unless it is shared with the `tenant`."""
        # One tenant's uploads take a share of the reading processes, not all of them.
        async with documents.current().tenants.slot(tenant_id):
            described = await asyncio.to_thread(describe, data)
        record = FileRecord(
            id=uuid4(),
            tenant_id=tenant_id,
            name=clean_name(name),
            media_type=described.media_type,
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            pages=described.pages,
            width=described.width,
            height=described.height,
            text_chars=described.text_chars,
            created_by=by,
            created_at=utc_now(),
            visibility=visibility,
        )
        # Bytes first: a file's row never names bytes that are not there.
        await self.store.put(record.id.hex, data)
        try:
            async with self.database.transaction() as connection:
                await FileRepository(connection, tenant_id).insert(record, described.chunks)
                await self._audit(connection, record, AuditAction.FILE_UPLOAD, by)
        except BaseException:
            await asyncio.shield(self.store.delete(record.id.hex))
            raise
        return record

    async def delete(self, tenant_id: str, file_id: UUID, *, by: str) -> FileRecord | None:
        """Deletes the tenant's file (audited, `file.delete`); None if it has none by that id.
        Tasks it was given to find it gone. Who may delete it is the caller's to check."""
        async with self.database.transaction() as connection:
            record = await FileRepository(connection, tenant_id).delete(file_id)
            if record is not None:
                await self._audit(connection, record, AuditAction.FILE_DELETE, by)
        if record is not None:
            await self.store.delete(record.id.hex)
        return record

    async def set_visibility(
        self, tenant_id: str, file_id: UUID, visibility: FileVisibility, *, by: str
    ) -> tuple[FileRecord, FileRecord] | None:
        """Shares the tenant's file with the tenant, or makes it its uploader's alone
        (audited, `file.update`, with the visibility before and after): the record before
        and after, or None if it has none by that id. Who may is the caller's to check."""
        async with self.database.transaction() as connection:
            repository = FileRepository(connection, tenant_id)
            before = await repository.get(file_id)
            after = await repository.set_visibility(file_id, visibility)
            if before is None or after is None:
                return None
            changed = {"before": before.visibility, "after": after.visibility}
            await self._audit(connection, after, AuditAction.FILE_UPDATE, by, visibility=changed)
        return before, after

    async def get(
        self, tenant_id: str, file_id: UUID, *, reader: str | None = None
    ) -> FileRecord | None:
        """The tenant's file, if `reader` may see it (None: whoever reads, the service)."""
        async with self.database.read() as connection:
            return await FileRepository(connection, tenant_id, reader=reader).get(file_id)

    async def get_many(
        self, tenant_id: str, file_ids: Sequence[UUID], *, reader: str | None = None
    ) -> list[FileRecord]:
        """The tenant's files among `file_ids` that `reader` may see, in their order; the
        other ids are left out (compare the lengths to refuse them)."""
        async with self.database.read() as connection:
            found = await FileRepository(connection, tenant_id, reader=reader).get_many(
                list(file_ids)
            )
        by_id = {record.id: record for record in found}
        return [by_id[file_id] for file_id in dict.fromkeys(file_ids) if file_id in by_id]

    async def page(
        self, tenant_id: str, *, cursor: Cursor | None, limit: int, reader: str | None = None
    ) -> Page[FileRecord]:
        async with self.database.read() as connection:
            files = FileRepository(connection, tenant_id, reader=reader)
            return await files.page(cursor=cursor, limit=limit)

    async def content(
        self, tenant_id: str, file_id: UUID, *, reader: str | None = None
    ) -> tuple[FileRecord, bytes] | None:
        record = await self.get(tenant_id, file_id, reader=reader)
        if record is None:
            return None
        data = await self.store.get(record.id.hex)
        if data is None:  # deleted meanwhile
            return None
        return record, data

    def access(self, tenant_id: str, attached: Sequence[str], *, user: str) -> FileAccess:
        """The tenant's files for one run of `user` (those it may read); `attached` are
        those given to its task."""
        return TenantFiles(self, tenant_id, tuple(attached), user)

    @staticmethod
    async def _audit(
        connection: AsyncConnection,
        record: FileRecord,
        action: AuditAction,
        by: str,
        **more: object,
    ) -> None:
        row = audit_row(
            actor=by,
            action=action,
            resource_type="file",
            resource_id=str(record.id),
            details={
                "name": record.name,
                "media_type": record.media_type,
                "size_bytes": record.size_bytes,
                "sha256": record.sha256,
                "visibility": record.visibility,
                **more,
            },
            at=utc_now(),
        )
        await AuditRepository(connection, record.tenant_id).append([row])


def attachment_line(record: FileRecord) -> str:
    """How a model is told of a file given to its task."""
    if record.pages is not None:
        kind = f"{record.media_type}, {record.pages} pages"
    elif record.width is not None and record.height is not None:
        kind = f"{record.media_type}, {record.width}x{record.height} pixels"
    else:
        kind = record.media_type
    return f"{record.name} ({kind}, {record.size_bytes} bytes), file_id {record.id}"


def file_info(record: FileRecord, user: str | None = None) -> FileInfo:
    """What a run of `user` learns of a file (`theirs`: someone else uploaded it)."""
    return FileInfo(
        id=str(record.id),
        name=record.name,
        media_type=record.media_type,
        size_bytes=record.size_bytes,
        created_at=record.created_at,
        pages=record.pages,
        width=record.width,
        height=record.height,
        theirs=user is not None and record.created_by != user,
    )


class TenantFiles:
    """One tenant's files as `FileAccess` for a run of `user`: ids that are not files it
    may read (malformed, deleted, another tenant's, another member's private one) are
    `not_found` alike."""

    def __init__(
        self, library: FileLibrary, tenant_id: str, attached: tuple[str, ...], user: str
    ) -> None:
        self._library = library
        self._database = library.database
        self._tenant_id = tenant_id
        self._attached = attached
        self._user = user

    def attached(self) -> Sequence[str]:
        return self._attached

    async def list_files(self, *, limit: int) -> list[FileInfo]:
        page = await self._library.page(
            self._tenant_id, cursor=None, limit=limit, reader=self._user
        )
        return [file_info(record, self._user) for record in page.items]

    async def info(self, file_id: str) -> FileInfo:
        return file_info(await self._record(file_id), self._user)

    async def content(self, file_id: str) -> bytes:
        record = await self._record(file_id)
        data = await self._library.store.get(record.id.hex)
        if data is None:
            raise _not_found(file_id)
        return data

    async def text(self, file_id: str) -> str | None:
        """The file's text; a PDF's pages are separated by `PAGE_BREAK` (form feed), page n
        being the n-th part."""
        record = await self._record(file_id)
        if record.text_chars is None:
            return None
        async with self._database.read() as connection:
            chunks = await FileRepository(connection, self._tenant_id).texts(record.id)
        if record.media_type != PDF:
            return "".join(chunk.text for chunk in chunks)
        pages = [""] * max((chunk.page or 0 for chunk in chunks), default=0)
        for chunk in chunks:
            if chunk.page:
                pages[chunk.page - 1] += chunk.text
        return PAGE_BREAK.join(pages)

    async def search(self, query: str, *, limit: int) -> list[FileMatch]:
        async with self._database.read() as connection:
            files = FileRepository(connection, self._tenant_id, reader=self._user)
            hits = await files.search(query, limit=limit)
        return [
            FileMatch(
                file=file_info(hit.file, self._user),
                rank=hit.rank,
                snippet=hit.snippet if hit.page is None else f"(page {hit.page}) {hit.snippet}",
            )
            for hit in hits
        ]

    async def _record(self, file_id: str) -> FileRecord:
        try:
            parsed = UUID(file_id)
        except (ValueError, TypeError, AttributeError):
            raise _not_found(file_id) from None
        record = await self._library.get(self._tenant_id, parsed, reader=self._user)
        if record is None:
            raise _not_found(file_id)
        return record


def _not_found(file_id: str) -> Exception:
    return not_found(f"no file {file_id!r} among this tenant's files")
