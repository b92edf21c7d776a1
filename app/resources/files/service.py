"""The files of the caller's tenant: uploads, reads and deletes through the tenant's
`FileLibrary`, answered as the API shows them."""

from urllib.parse import quote
from uuid import UUID

from fastapi import Request, Response

from app.api.files.schemas import FileOut, FilePage
from app.api.files.upload import read_upload
from app.api.state import AppState
from app.governance.callers import Caller
from app.resources.files import FileLibrary
from app.runs.errors import Forbidden, NotFound
from app.security.rbac import Permission
from app.storage.pagination import Cursor
from app.storage.records import FileRecord, FileVisibility


def library(state: AppState) -> FileLibrary:
    """The process's file library (the one its runs' tools use), or one on its settings."""
    return state.toolbox.files or FileLibrary.from_settings(state.database, state.settings)


def reader(caller: Caller) -> str | None:
    """Whose private files the caller sees besides the tenant's shared ones: its own, or
    all of them with `file:manage`."""
    return None if Permission.FILE_MANAGE in caller.permissions else caller.subject


async def upload_file(
    state: AppState, caller: Caller, request: Request, visibility: FileVisibility
) -> FileOut:
    upload = await read_upload(request, max_bytes=state.settings.file_max_bytes)
    record = await library(state).upload(
        caller.tenant_id, upload.name, upload.data, by=caller.subject, visibility=visibility
    )
    return FileOut.of(record)


async def list_files(
    state: AppState, caller: Caller, *, cursor: str | None, limit: int
) -> FilePage:
    page = await library(state).page(
        caller.tenant_id,
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
        reader=reader(caller),
    )
    return FilePage(items=[FileOut.of(item) for item in page.items], next_cursor=page.next_cursor)


async def read_file(state: AppState, caller: Caller, file_id: UUID) -> FileOut:
    return FileOut.of(await _visible(state, caller, file_id))


async def file_content(state: AppState, caller: Caller, file_id: UUID) -> Response:
    """The bytes, as the type they were sniffed to be, to be saved rather than shown."""
    found = await library(state).content(caller.tenant_id, file_id, reader=reader(caller))
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


async def share_file(
    state: AppState, caller: Caller, file_id: UUID, visibility: FileVisibility
) -> FileOut:
    await _owned(state, caller, file_id, "share")
    changed = await library(state).set_visibility(
        caller.tenant_id, file_id, visibility, by=caller.subject
    )
    if changed is None:  # deleted meanwhile
        raise NotFound("file", file_id)
    return FileOut.of(changed[1])


async def delete_file(state: AppState, caller: Caller, file_id: UUID) -> None:
    await _owned(state, caller, file_id, "delete")
    if await library(state).delete(caller.tenant_id, file_id, by=caller.subject) is None:
        raise NotFound("file", file_id)


async def _visible(state: AppState, caller: Caller, file_id: UUID) -> FileRecord:
    """The file, if the caller may see it; another member's private file is as unknown as
    another tenant's (404): its existence is not the caller's to learn."""
    record = await library(state).get(caller.tenant_id, file_id, reader=reader(caller))
    if record is None:
        raise NotFound("file", file_id)
    return record


async def _owned(state: AppState, caller: Caller, file_id: UUID, verb: str) -> FileRecord:
    """The file, if the caller may change it: its uploader, or with `file:manage`. A file
    the caller sees but may not change is 403 (it knows the file, it lacks the right); one
    it cannot see is 404."""
    record = await _visible(state, caller, file_id)
    if record.created_by != caller.subject and Permission.FILE_MANAGE not in caller.permissions:
        raise Forbidden(
            f"members {verb} only the files they uploaded; this one is {record.created_by}'s "
            f"(the `{Permission.FILE_MANAGE}` permission allows any)",
            permission=Permission.FILE_MANAGE,
        )
    return record


def attachment(name: str) -> str:
    """`Content-Disposition: attachment` naming the file: an ASCII fallback and the name
    itself in RFC 8187 form."""
    fallback = "".join(
        char if char.isascii() and char.isprintable() and char not in '"\\;' else "_"
        for char in name
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
