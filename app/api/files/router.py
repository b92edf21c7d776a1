"""/api/v1/files: the caller's tenant's uploaded files, which its tasks read and search."""

from typing import Annotated, Any
from urllib.parse import quote
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response, status

from app.api.access import RequireFileRead, RequireFileWrite
from app.api.deps import State
from app.api.errors import problems
from app.api.files.schemas import VISIBILITY, FileChange, FileOut, FilePage
from app.api.files.upload import FILE_FIELD, read_upload
from app.api.inputs import CheckedRoute
from app.api.services import Files
from app.resources.files import BINARY, IMAGE_TYPES, PDF, TEXT, service
from app.storage.pagination import MAX_PAGE_SIZE
from app.storage.records import FileVisibility

router = APIRouter(prefix="/api/v1/files", tags=["files"], route_class=CheckedRoute)


_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": [FILE_FIELD],
                    "properties": {FILE_FIELD: {"type": "string", "format": "binary"}},
                }
            }
        },
    }
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_BYTES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The file's bytes, as its sniffed media type.",
        "content": dict.fromkeys((BINARY, PDF, TEXT, *sorted(IMAGE_TYPES.values())), _BINARY),
    }
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Upload a file",
    responses=problems(401, 403, 413, 422),
    openapi_extra=_UPLOAD_BODY,
)
async def upload_file(
    request: Request,
    caller: RequireFileWrite,
    state: State,
    files: Files,
    visibility: Annotated[FileVisibility, Query(description=VISIBILITY)] = "private",
) -> FileOut:
    """A `multipart/form-data` body with one `file` part. Its type is sniffed from its bytes
    (the client's `Content-Type` is not trusted); text files' and PDFs' text is extracted
    for `read_file` and `search_files`. A file larger than the service's `file_max_bytes` is
    refused with 413. It is its uploader's alone unless `visibility=tenant` shares it (or a
    later PATCH does). Audited (`file.upload`)."""
    upload = await read_upload(request, max_bytes=state.settings.file_max_bytes)
    record = await service.upload_file(files, caller, upload.name, upload.data, visibility)
    return FileOut.of(record)


@router.get("", summary="List files", responses=problems(401, 403, 422))
async def list_files(
    caller: RequireFileRead,
    files: Files,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> FilePage:
    """The tenant's files the caller may see, newest first: those shared with the tenant
    and its own private ones (every file with `file:manage`)."""
    return FilePage.of(await service.list_files(files, caller, cursor=cursor, limit=limit))


@router.get(
    "/{file_id}", summary="Read a file's description", responses=problems(401, 403, 404, 422)
)
async def read_file(file_id: UUID, caller: RequireFileRead, files: Files) -> FileOut:
    return FileOut.of(await service.read_file(files, caller, file_id))


@router.get(
    "/{file_id}/content",
    summary="Download a file",
    response_class=Response,
    responses={**_BYTES, **problems(401, 403, 404, 422)},
)
async def file_content(file_id: UUID, caller: RequireFileRead, files: Files) -> Response:
    """Its bytes with its sniffed media type, as an attachment (`nosniff`, sandboxed): a
    browser saves it rather than showing it."""
    record, data = await service.file_content(files, caller, file_id)
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


@router.delete(
    "/{file_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a file",
    responses=problems(401, 403, 404, 422),
)
async def delete_file(file_id: UUID, caller: RequireFileWrite, files: Files) -> Response:
    """Its bytes, text and description go; tasks it was given to find it gone. Its uploader
    may delete it, and those with `file:manage`: another member gets 403 for a shared file,
    404 for a private one. Audited (`file.delete`)."""
    await service.delete_file(files, caller, file_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.patch(
    "/{file_id}",
    summary="Share a file with the tenant, or make it private",
    responses=problems(401, 403, 404, 422),
)
async def change_file(
    file_id: UUID, body: FileChange, caller: RequireFileWrite, files: Files
) -> FileOut:
    """Sets whom it is shared with (`visibility`); its uploader may, and those with
    `file:manage`. Runs read it as it says from then on. Audited (`file.update`, with
    the visibility before and after)."""
    return FileOut.of(await service.share_file(files, caller, file_id, body.visibility))


def attachment(name: str) -> str:
    """`Content-Disposition: attachment` naming the file: an ASCII fallback and the name
    itself in RFC 8187 form."""
    fallback = "".join(
        char if char.isascii() and char.isprintable() and char not in '"\\;' else "_"
        for char in name
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
