"""The files of a caller's tenant, on its behalf: which it may see (the tenant's shared ones
and its own; every one with `file:manage`) and change (those it uploaded; any with
`file:manage`), through the tenant's `FileLibrary`."""

from uuid import UUID

from app.errors import Forbidden, NotFound
from app.governance.callers import Caller
from app.resources.files.library import FileLibrary
from app.security.rbac import Permission
from app.storage.pagination import Cursor, Page
from app.storage.records import FileRecord, FileVisibility


def reader(caller: Caller) -> str | None:
    """Whose private files the caller sees besides the tenant's shared ones: its own, or
    all of them with `file:manage`."""
    return None if Permission.FILE_MANAGE in caller.permissions else caller.subject


async def upload_file(
    library: FileLibrary, caller: Caller, name: str, data: bytes, visibility: FileVisibility
) -> FileRecord:
    return await library.upload(
        caller.tenant_id, name, data, by=caller.subject, visibility=visibility
    )


async def list_files(
    library: FileLibrary, caller: Caller, *, cursor: str | None, limit: int
) -> Page[FileRecord]:
    return await library.page(
        caller.tenant_id,
        cursor=Cursor.decode(cursor) if cursor else None,
        limit=limit,
        reader=reader(caller),
    )


async def read_file(library: FileLibrary, caller: Caller, file_id: UUID) -> FileRecord:
    """The file, if the caller may see it; another member's private file is as unknown as
    another tenant's (`NotFound`): its existence is not the caller's to learn."""
    record = await library.get(caller.tenant_id, file_id, reader=reader(caller))
    if record is None:
        raise NotFound("file", file_id)
    return record


async def file_content(
    library: FileLibrary, caller: Caller, file_id: UUID
) -> tuple[FileRecord, bytes]:
    """The file and its bytes, if the caller may see it."""
    found = await library.content(caller.tenant_id, file_id, reader=reader(caller))
    if found is None:
        raise NotFound("file", file_id)
    return found


async def share_file(
    library: FileLibrary, caller: Caller, file_id: UUID, visibility: FileVisibility
) -> FileRecord:
    await _owned(library, caller, file_id, "share")
    changed = await library.set_visibility(caller.tenant_id, file_id, visibility, by=caller.subject)
    if changed is None:  # deleted meanwhile
        raise NotFound("file", file_id)
    return changed[1]


async def delete_file(library: FileLibrary, caller: Caller, file_id: UUID) -> None:
    await _owned(library, caller, file_id, "delete")
    if await library.delete(caller.tenant_id, file_id, by=caller.subject) is None:
        raise NotFound("file", file_id)


async def _owned(library: FileLibrary, caller: Caller, file_id: UUID, verb: str) -> FileRecord:
    """The file, if the caller may change it: its uploader, or with `file:manage`. A file
    the caller sees but may not change is `Forbidden` (it knows the file, it lacks the
    right); one it cannot see is `NotFound`."""
    record = await read_file(library, caller, file_id)
    if record.created_by != caller.subject and Permission.FILE_MANAGE not in caller.permissions:
        raise Forbidden(
            f"members {verb} only the files they uploaded; this one is {record.created_by}'s "
            f"(the `{Permission.FILE_MANAGE}` permission allows any)",
            permission=Permission.FILE_MANAGE,
        )
    return record
