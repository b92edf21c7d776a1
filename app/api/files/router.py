"""/api/v1/files: the caller's tenant's uploaded files, which its tasks read and search."""

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response, status

from app.api.access import RequireFileRead, RequireFileWrite
from app.api.deps import State
from app.api.errors import problems
from app.api.files import service
from app.api.files.schemas import VISIBILITY, FileChange, FileOut, FilePage
from app.api.files.upload import FILE_FIELD
from app.api.inputs import CheckedRoute
from app.resources.files import BINARY, IMAGE_TYPES, PDF, TEXT
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
    visibility: Annotated[FileVisibility, Query(description=VISIBILITY)] = "private",
) -> FileOut:
    """A `multipart/form-data` body with one `file` part. Its type is sniffed from its bytes
    (the client's `Content-Type` is not trusted); text files' and PDFs' text is extracted
    for `read_file` and `search_files`. A file larger than the service's `file_max_bytes` is
    refused with 413. It is its uploader's alone unless `visibility=tenant` shares it (or a
    later PATCH does). Audited (`file.upload`)."""
    return await service.upload_file(state, caller, request, visibility)


@router.get("", summary="List files", responses=problems(401, 403, 422))
async def list_files(
    caller: RequireFileRead,
    state: State,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> FilePage:
    """The tenant's files the caller may see, newest first: those shared with the tenant
    and its own private ones (every file with `file:manage`)."""
    return await service.list_files(state, caller, cursor=cursor, limit=limit)


@router.get(
    "/{file_id}", summary="Read a file's description", responses=problems(401, 403, 404, 422)
)
async def read_file(file_id: UUID, caller: RequireFileRead, state: State) -> FileOut:
    return await service.read_file(state, caller, file_id)


@router.get(
    "/{file_id}/content",
    summary="Download a file",
    response_class=Response,
    responses={**_BYTES, **problems(401, 403, 404, 422)},
)
async def file_content(file_id: UUID, caller: RequireFileRead, state: State) -> Response:
    """Its bytes with its sniffed media type, as an attachment (`nosniff`, sandboxed): a
    browser saves it rather than showing it."""
    return await service.file_content(state, caller, file_id)


@router.delete(
    "/{file_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a file",
    responses=problems(401, 403, 404, 422),
)
async def delete_file(file_id: UUID, caller: RequireFileWrite, state: State) -> Response:
    """Its bytes, text and description go; tasks it was given to find it gone. Its uploader
    may delete it, and those with `file:manage`: another member gets 403 for a shared file,
    404 for a private one. Audited (`file.delete`)."""
    await service.delete_file(state, caller, file_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.patch(
    "/{file_id}",
    summary="Share a file with the tenant, or make it private",
    responses=problems(401, 403, 404, 422),
)
async def change_file(
    file_id: UUID, body: FileChange, caller: RequireFileWrite, state: State
) -> FileOut:
    """Sets whom it is shared with (`visibility`); its uploader may, and those with
    `file:manage`. Runs read it as it says from then on. Audited (`file.update`, with
    the visibility before and after)."""
    return await service.share_file(state, caller, file_id, body.visibility)
