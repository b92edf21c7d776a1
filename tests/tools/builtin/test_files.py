"""The file tools, through the executor, over a real file library on each database: they list,
read (text, PDF pages, images) and search the run's tenant's files, and find no other's."""

import base64
import io
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import uuid4

import pytest
from PIL import Image

from app.chain import ErrorCode, ReasoningChain
from app.resources.files import FileLibrary
from app.storage import Database
from app.storage.files import DatabaseFileStore
from app.storage.records import FileRecord
from app.tools.builtin import builtin_tools
from app.tools.builtin.files import MAX_IMAGE_SIDE, file_tools
from app.tools.executor import ToolExecutor
from app.tools.models import ToolCallContext
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult
from app.tools.services import ToolServices
from tests.resources.documents import make_image, make_pdf


@pytest.fixture
async def library(database_url: str) -> AsyncIterator[FileLibrary]:
    database = Database(database_url)
    yield FileLibrary(database, DatabaseFileStore(database))
    await database.dispose()


def _tenant() -> str:
    return f"t-{uuid4().hex[:12]}"


async def _call(
    library: FileLibrary | None,
    tenant: str,
    name: str,
    arguments: dict[str, Any],
    attached: Sequence[FileRecord] = (),
) -> ToolResult:
    chain = ReasoningChain(task_id="t", agent_id="a")
    services = (
        None
        if library is None
        else ToolServices(files=library.access(tenant, [str(f.id) for f in attached], user="a"))
    )
    context = ToolCallContext(
        task_id="t", agent_id="a", chain_id=chain.id, tenant_id=tenant, services=services
    )
    return await ToolExecutor(ToolRegistry(file_tools())).execute(chain, context, name, arguments)


def _value(result: ToolResult) -> dict[str, Any]:
    assert result.success, result.error
    assert isinstance(result.value, dict)
    return result.value


def test_the_file_tools_are_built_in() -> None:
    names = {tool.definition.name for tool in builtin_tools()}
    assert {"list_files", "read_file", "search_files"} <= names


async def test_list_files_puts_the_attached_files_first(library: FileLibrary) -> None:
    tenant = _tenant()
    old = await library.upload(tenant, "old.txt", b"old", by="a")
    await library.upload(tenant, "new.txt", b"new", by="a")
    value = _value(await _call(library, tenant, "list_files", {}, attached=[old]))
    assert [(f["name"], f["attached"]) for f in value["files"]] == [
        ("old.txt", True),
        ("new.txt", False),
    ]
    assert value["files"][0] == {
        "file_id": str(old.id),
        "name": "old.txt",
        "media_type": "text/plain",
        "size_bytes": 3,
        "created_at": old.created_at.isoformat(timespec="seconds"),
        "attached": True,
    }


async def test_list_files_says_which_attached_files_are_gone(library: FileLibrary) -> None:
    tenant = _tenant()
    gone = await library.upload(tenant, "gone.txt", b"bye", by="a")
    await library.delete(tenant, gone.id, by="a")
    value = _value(await _call(library, tenant, "list_files", {}, attached=[gone]))
    assert value["files"] == []
    assert value["unavailable_attached"] == [str(gone.id)]


async def test_read_file_reads_text_a_window_at_a_time(library: FileLibrary) -> None:
    tenant = _tenant()
    text = "".join(f"line {n:03}\n" for n in range(100))  # 900 characters
    record = await library.upload(tenant, "lines.txt", text.encode(), by="a")
    first = _value(
        await _call(library, tenant, "read_file", {"file_id": str(record.id), "max_chars": 500})
    )
    assert (first["text"], first["start"], first["end"]) == (text[:500], 0, 500)
    assert (first["total_chars"], first["next_start"]) == (900, 500)
    rest = _value(
        await _call(library, tenant, "read_file", {"file_id": str(record.id), "start": 500})
    )
    assert (rest["text"], rest["next_start"]) == (text[500:], None)


async def test_read_file_reads_a_pdf_by_page_range(library: FileLibrary) -> None:
    tenant = _tenant()
    record = await library.upload(
        tenant, "r.pdf", make_pdf(["alpha page", "beta page", "gamma page", "delta page"]), by="a"
    )
    value = _value(
        await _call(library, tenant, "read_file", {"file_id": str(record.id), "pages": "2-3"})
    )
    assert value["pages_read"] == "2-3"
    assert value["pages"] == 4
    assert value["text"] == "[page 2]\nbeta page\n\n[page 3]\ngamma page"
    one = _value(
        await _call(library, tenant, "read_file", {"file_id": str(record.id), "pages": " 4 "})
    )
    assert one["text"] == "[page 4]\ndelta page"
    everything = _value(await _call(library, tenant, "read_file", {"file_id": str(record.id)}))
    assert everything["pages_read"] == "1-4"


@pytest.mark.parametrize("pages", ["0", "5", "3-2", "2-9", "x", "1,2"])
async def test_read_file_refuses_pages_the_pdf_does_not_have(
    library: FileLibrary, pages: str
) -> None:
    tenant = _tenant()
    record = await library.upload(tenant, "r.pdf", make_pdf(["a", "b", "c", "d"]), by="a")
    result = await _call(library, tenant, "read_file", {"file_id": str(record.id), "pages": pages})
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS


async def test_read_file_knows_only_pdfs_have_pages(library: FileLibrary) -> None:
    tenant = _tenant()
    record = await library.upload(tenant, "t.txt", b"text", by="a")
    result = await _call(library, tenant, "read_file", {"file_id": str(record.id), "pages": "1"})
    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert "only PDFs have pages" in (result.error or "")


async def test_read_file_gives_a_small_image_as_it_is(library: FileLibrary) -> None:
    tenant = _tenant()
    data = make_image(120, 80)
    record = await library.upload(tenant, "pic.png", data, by="a")
    result = await _call(library, tenant, "read_file", {"file_id": str(record.id)})
    value = _value(result)
    assert (value["type"], value["media_type"], value["width"], value["height"]) == (
        "image",
        "image/png",
        120,
        80,
    )
    assert value["image_type"] == "image/png"
    [image] = result.images
    assert (image.media_type, image.data) == ("image/png", data)
    assert base64.b64decode(image.data_url.removeprefix("data:image/png;base64,")) == data
    # The recorded step describes the image; the image itself is not recorded.
    assert "base64" not in json.dumps(result.info.result)


async def test_read_file_scales_a_large_image_down_for_the_model(library: FileLibrary) -> None:
    tenant = _tenant()
    record = await library.upload(tenant, "wide.png", make_image(3000, 1000), by="a")
    result = await _call(library, tenant, "read_file", {"file_id": str(record.id)})
    value = _value(result)
    assert (value["width"], value["height"]) == (3000, 1000)
    assert value["scaled_to"] == [MAX_IMAGE_SIDE, 523]
    assert (value["media_type"], value["image_type"]) == ("image/png", "image/jpeg")
    [given] = result.images
    assert given.media_type == "image/jpeg"
    with Image.open(io.BytesIO(given.data)) as image:
        assert (image.format, image.size) == ("JPEG", (MAX_IMAGE_SIDE, 523))


async def test_read_file_gives_no_image_it_cannot_decode(library: FileLibrary) -> None:
    tenant = _tenant()
    broken = make_image(40, 40)[:60]
    record = await library.upload(tenant, "broken.png", broken, by="a")
    result = await _call(library, tenant, "read_file", {"file_id": str(record.id)})
    value = _value(result)
    assert value["note"] == "the image could not be decoded"
    assert result.images == ()


async def test_read_file_describes_a_binary_file(library: FileLibrary) -> None:
    tenant = _tenant()
    record = await library.upload(tenant, "blob.bin", bytes(range(256)), by="a")
    value = _value(await _call(library, tenant, "read_file", {"file_id": str(record.id)}))
    assert value["media_type"] == "application/octet-stream"
    assert "no text" in value["note"]
    assert "text" not in value


async def test_search_files_ranks_the_better_match_first(library: FileLibrary) -> None:
    tenant = _tenant()
    await library.upload(tenant, "once.txt", b"The invoice was mentioned once here.", by="a")
    best = await library.upload(
        tenant,
        "invoices.pdf",
        make_pdf(["cover", "Invoice list: invoice 1, invoice 2, invoice 3 and invoices"]),
        by="a",
    )
    await library.upload(tenant, "other.txt", b"Nothing to see.", by="a")
    value = _value(
        await _call(library, tenant, "search_files", {"query": "invoice"}, attached=[best])
    )
    assert value["count"] == 2
    first, second = value["matches"]
    assert (first["name"], first["attached"]) == ("invoices.pdf", True)
    assert (second["name"], second["attached"]) == ("once.txt", False)
    assert first["rank"] > second["rank"]
    assert first["snippet"].startswith("(page 2) ")
    assert "**invoice**" in second["snippet"].lower()


async def test_another_tenants_file_is_not_found_by_any_file_tool(library: FileLibrary) -> None:
    owner, other = _tenant(), _tenant()
    record = await library.upload(owner, "plans.txt", b"the heist happens at noon", by="a")
    file_id = str(record.id)
    result = await _call(library, other, "read_file", {"file_id": file_id})
    assert result.error_code is ErrorCode.NOT_FOUND
    assert file_id in (result.error or "")
    listed = _value(await _call(library, other, "list_files", {}, attached=[record]))
    assert (listed["files"], listed["unavailable_attached"]) == ([], [file_id])
    found = _value(await _call(library, other, "search_files", {"query": "heist"}))
    assert found["matches"] == []


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("list_files", {}),
        ("read_file", {"file_id": "5b0c1e8e-3c5a-4a43-9b7e-1f1d0d7c2a11"}),
        ("search_files", {"query": "anything"}),
    ],
)
async def test_without_a_file_service_a_file_tool_fails_clearly(
    name: str, arguments: dict[str, Any]
) -> None:
    result = await _call(None, _tenant(), name, arguments)
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert "files are not available here" in (result.error or "")
