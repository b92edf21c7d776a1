"""The files of the caller's tenant: uploads, reads and deletes through the tenant's
`FileLibrary`, answered as the API shows them."""

from urllib.parse import quote
from uuid import UUID

from fastapi import Request, Response

from app.api.access import Caller
from app.api.files.schemas import FileOut, FilePage
from app.api.files.upload import read_upload
from app.api.state import AppState
from app.resources.files import FileLibrary
from app.runs.errors import NotFound
from app.storage.pagination import Cursor


def library(state: AppState) -> FileLibrary:
    """The process's file library (the one its runs' tools use), or one on its settings."""
    return state.toolbox.files or FileLibrary.from_settings(state.database, state.settings)


async def upload_file(state: AppState, caller: Caller, request: Request) -> FileOut:
    upload = await read_upload(request, max_bytes=state.settings.file_max_bytes)
    record = await library(state).upload(
        caller.tenant_id, upload.name, upload.data, by=caller.subject
    )
    return FileOut.of(record)


async def list_files(
    state: AppState, caller: Caller, *, cursor: str | None, limit: int
) -> FilePage:
    page = await library(state).page(
        caller.tenant_id, cursor=Cursor.decode(cursor) if cursor else None, limit=limit
    )
    return FilePage(items=[FileOut.of(item) for item in page.items], next_cursor=page.next_cursor)


async def read_file(state: AppState, caller: Caller, file_id: UUID) -> FileOut:
    record = await library(state).get(caller.tenant_id, file_id)
    if record is None:
        raise NotFound("file", file_id)
    return FileOut.of(record)


async def file_content(state: AppState, caller: Caller, file_id: UUID) -> Response:
    """The bytes, as the type they were sniffed to be, to be saved rather than shown."""
    found = await library(state).content(caller.tenant_id, file_id)
    if found is None:
        raise NotFound("file", file_id)
    record, data = found
    return Response(
        data,
        media_type=record.media_type,
        headers={
            "Content-Disposition": attachment(record.name),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, no-store",
        },
    )


async def delete_file(state: AppState, caller: Caller, file_id: UUID) -> None:
    if await library(state).delete(caller.tenant_id, file_id, by=caller.subject) is None:
        raise NotFound("file", file_id)


def attachment(name: str) -> str:
    """`Content-Disposition: attachment` naming the file: an ASCII fallback and the name
    itself in RFC 8187 form."""
    fallback = "".join(
        char if char.isascii() and char.isprintable() and char not in '"\\;' else "_"
        for char in name
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
