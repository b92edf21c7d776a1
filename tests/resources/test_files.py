"""The file library: what an upload is comes from its bytes; uploads and deletes are stored
with their audit events; a run's `FileAccess` sees its own tenant's files only."""

from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from app.chain import ErrorCode
from app.resources.files.library import (
    CHUNK_CHARS,
    PAGE_BREAK,
    FileLibrary,
    attachment_line,
    chunked,
    clean_name,
    describe,
)
from app.storage import Database
from app.storage.audit import AuditRepository
from app.storage.files import DatabaseFileStore, DirectoryFileStore
from app.tools.errors import ToolError
from tests.resources.documents import make_image, make_pdf

# What an upload is.


def test_a_pdf_is_known_by_its_magic_and_read_page_by_page() -> None:
    described = describe(make_pdf(["First page\nwith two lines", "Second page"]))
    assert described.media_type == "application/pdf"
    assert described.pages == 2
    assert [(chunk.page, chunk.text) for chunk in described.chunks] == [
        (1, "First page\nwith two lines"),
        (2, "Second page"),
    ]
    assert described.text_chars == len("First page\nwith two lines") + len("Second page")


def test_a_pdf_pypdf_cannot_read_is_still_a_pdf_without_text() -> None:
    described = describe(b"%PDF-1.7\nthis is no PDF at all")
    assert (described.media_type, described.pages, described.text_chars) == (
        "application/pdf",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("image_format", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_an_image_is_known_by_pillow_with_its_size(image_format: str, media_type: str) -> None:
    described = describe(make_image(40, 30, image_format))
    assert (described.media_type, described.width, described.height) == (media_type, 40, 30)
    assert described.text_chars is None


@pytest.mark.parametrize(
    ("data", "media_type", "text"),
    [
        (b"plain text\n", "text/plain", "plain text\n"),
        ("caf\u00e9 \u2603\n".encode(), "text/plain", "caf\u00e9 \u2603\n"),
        (b"\xef\xbb\xbfwith a BOM", "text/plain", "with a BOM"),
        (b"", "text/plain", ""),
        # Pillow would take this for a PBM image; only the image formats listed are tried.
        (b"P1\n2 2\n0 1\n1 0\n", "text/plain", "P1\n2 2\n0 1\n1 0\n"),
        (b"%PDF is not at the start: text", "text/plain", "%PDF is not at the start: text"),
        (b"text with a \x00 NUL", "application/octet-stream", None),
        (b"caf\xe9 in Latin-1", "application/octet-stream", None),
        (bytes(range(256)), "application/octet-stream", None),
    ],
)
def test_text_is_utf8_without_nul_and_the_rest_is_binary(
    data: bytes, media_type: str, text: str | None
) -> None:
    described = describe(data)
    assert described.media_type == media_type
    assert (None if not described.has_text else "".join(c.text for c in described.chunks)) == text


def test_an_image_with_a_text_extension_is_still_an_image() -> None:
    # What the client calls it plays no part: only the bytes do.
    assert describe(make_image(5, 5)).media_type == "image/png"


def test_long_text_is_chunked_at_line_ends_and_joins_back() -> None:
    text = "".join(f"line {n} " + "x" * (n % 97) + "\n" for n in range(5000))
    pieces = chunked(text)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(len(piece) <= CHUNK_CHARS for piece in pieces)
    assert all(piece.endswith("\n") for piece in pieces)


def test_text_without_line_ends_is_chunked_at_the_size() -> None:
    text = "y" * (CHUNK_CHARS * 2 + 5)
    assert [len(piece) for piece in chunked(text)] == [CHUNK_CHARS, CHUNK_CHARS, 5]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\notes.txt", "notes.txt"),
        ("tab\tand\x00nul.txt", "tabandnul.txt"),
        ("", "upload"),
        (None, "upload"),
        ("dir/", "upload"),
        ("n" * 300, "n" * 255),
        ("r\u00e9sum\u00e9.txt", "r\u00e9sum\u00e9.txt"),
    ],
)
def test_a_file_name_keeps_only_its_last_part_and_printable_characters(
    given: str | None, stored: str
) -> None:
    assert clean_name(given) == stored


# The library, on each database and with each byte store.


@pytest.fixture(params=["database", "directory"])
async def library(
    request: pytest.FixtureRequest, database_url: str, tmp_path: Path
) -> AsyncIterator[FileLibrary]:
    database = Database(database_url)
    store = (
        DatabaseFileStore(database)
        if request.param == "database"
        else DirectoryFileStore(tmp_path / "files")
    )
    yield FileLibrary(database, store)
    await database.dispose()


def _tenant() -> str:
    return f"t-{uuid4().hex[:12]}"


async def test_an_upload_is_stored_with_what_its_bytes_are_and_audited(
    library: FileLibrary,
) -> None:
    tenant = _tenant()
    data = make_image(64, 48)
    record = await library.upload(tenant, "photo.txt", data, by="alice")
    assert (record.media_type, record.width, record.height) == ("image/png", 64, 48)
    assert (record.name, record.size_bytes, record.created_by) == ("photo.txt", len(data), "alice")
    assert await library.get(tenant, record.id) == record
    assert await library.content(tenant, record.id) == (record, data)
    async with library.database.read() as connection:
        events = await AuditRepository(connection, tenant).page(limit=10)
    assert [(e.action, e.resource_type, e.resource_id, e.actor) for e in events] == [
        ("file.upload", "file", str(record.id), "alice")
    ]
    assert events[0].details["sha256"] == record.sha256


async def test_a_delete_removes_the_file_and_its_bytes_and_is_audited(
    library: FileLibrary,
) -> None:
    tenant = _tenant()
    record = await library.upload(tenant, "a.txt", b"some words", by="alice")
    assert await library.delete(tenant, record.id, by="bob") == record
    assert await library.get(tenant, record.id) is None
    assert await library.content(tenant, record.id) is None
    assert await library.store.get(record.id.hex) is None
    assert await library.delete(tenant, record.id, by="bob") is None
    async with library.database.read() as connection:
        events = await AuditRepository(connection, tenant).page(limit=10)
    assert [(e.action, e.actor) for e in events] == [
        ("file.delete", "bob"),
        ("file.upload", "alice"),
    ]


async def test_another_tenant_can_neither_read_nor_delete_a_file(library: FileLibrary) -> None:
    tenant, other = _tenant(), _tenant()
    record = await library.upload(tenant, "a.txt", b"private words", by="alice")
    assert await library.get(other, record.id) is None
    assert await library.content(other, record.id) is None
    assert await library.delete(other, record.id, by="mallory") is None
    assert (await library.page(other, cursor=None, limit=10)).items == []
    assert await library.get(tenant, record.id) == record


async def test_a_runs_access_reads_text_pdf_pages_and_searches(library: FileLibrary) -> None:
    tenant = _tenant()
    text = await library.upload(tenant, "notes.txt", b"otters hold hands\n", by="a")
    pdf = await library.upload(
        tenant, "paper.pdf", make_pdf(["intro", "otters otters otters", "end"]), by="a"
    )
    image = await library.upload(tenant, "pic.png", make_image(8, 8), by="a")
    files = library.access(tenant, [str(text.id)], user="a")
    assert files.attached() == (str(text.id),)
    assert await files.text(str(text.id)) == "otters hold hands\n"
    assert await files.text(str(pdf.id)) == PAGE_BREAK.join(
        ["intro", "otters otters otters", "end"]
    )
    assert await files.text(str(image.id)) is None
    assert (await files.info(str(pdf.id))).pages == 3
    assert await files.content(str(image.id)) == make_image(8, 8)
    assert [info.name for info in await files.list_files(limit=10)] == [
        "pic.png",
        "paper.pdf",
        "notes.txt",
    ]
    matches = await files.search("otters", limit=5)
    assert [match.file.name for match in matches] == ["paper.pdf", "notes.txt"]
    assert matches[0].snippet.startswith("(page 2) ")
    assert "**otters**" in matches[0].snippet.lower()


async def test_a_runs_access_finds_no_file_of_another_tenant(library: FileLibrary) -> None:
    tenant, other = _tenant(), _tenant()
    record = await library.upload(tenant, "a.txt", b"secret plans", by="alice")
    theirs = library.access(other, [str(record.id)], user="alice")
    for call in (theirs.info, theirs.content, theirs.text):
        with pytest.raises(ToolError) as caught:
            await call(str(record.id))
        assert caught.value.error_code is ErrorCode.NOT_FOUND
    assert await theirs.search("secret plans", limit=5) == []
    assert await theirs.list_files(limit=10) == []


@pytest.mark.parametrize(
    "file_id", ["", "not-a-uuid", "1" * 64, "d0ea567f-b387-48ec-b995-8d2dba2042a3"]
)
async def test_a_malformed_or_unknown_id_is_not_found(library: FileLibrary, file_id: str) -> None:
    files = library.access(_tenant(), [], user="a")
    with pytest.raises(ToolError) as caught:
        await files.info(file_id)
    assert caught.value.error_code is ErrorCode.NOT_FOUND


async def test_files_given_to_a_task_are_looked_up_in_order_within_the_tenant(
    library: FileLibrary,
) -> None:
    tenant, other = _tenant(), _tenant()
    first = await library.upload(tenant, "a.txt", b"a", by="a")
    second = await library.upload(tenant, "b.pdf", make_pdf(["x", "y"]), by="a")
    theirs = await library.upload(other, "c.txt", b"c", by="a")
    ids = [second.id, uuid4(), theirs.id, first.id, second.id]
    assert await library.get_many(tenant, ids) == [second, first]
    assert attachment_line(second) == (
        f"b.pdf (application/pdf, 2 pages, {second.size_bytes} bytes), file_id {second.id}"
    )
