"""The file tools: `list_files`, `read_file` and `search_files`, over the run's tenant's files
that its user may read (`ToolServices.files`). A file that is not among them, another
tenant's or another member's private one included, is `not_found`, whatever its id.

What they read is the tenant's, not public (`private_output`); what another member uploaded
is also untrusted (its result's `untrusted` label): see `app.tools.dataflow`."""

import asyncio
import io
import re
from typing import Any

from PIL import Image

from app.chain import ErrorCode, ToolType
from app.chain.models import DataLabel
from app.tools.base import BaseTool
from app.tools.dataflow import UNTRUSTED
from app.tools.errors import FieldError, InvalidToolArguments, ToolError
from app.tools.models import (
    MAX_MODEL_IMAGE_BYTES,
    MODEL_IMAGE_TYPES,
    NO_RETRY,
    ModelImage,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolVisibilityConfig,
)
from app.tools.services import FileAccess, FileInfo, require

# What someone else wrote, for the run's data flow.
_THEIRS: frozenset[DataLabel] = frozenset({UNTRUSTED})

LIST_FILES = "list_files"
READ_FILE = "read_file"
SEARCH_FILES = "search_files"

# How a PDF's pages are told apart in `FileAccess.text`.
PAGE_BREAK = "\f"
PDF = "application/pdf"
DEFAULT_READ_CHARS = 12_000
MAX_READ_CHARS = 50_000
MAX_SNIPPET_CHARS = 400
# Images go to a model as they are when it takes them so (type, side, size), else scaled down
# to this side; past MAX_DECODE_PIXELS they are not decoded at all (metadata only).
MAX_IMAGE_SIDE = 1568
MAX_DECODE_PIXELS = 50_000_000

_FILE_ID: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": "The file's id, as list_files or search_files gives it.",
}
_PAGES = re.compile(r"\s*(\d{1,6})\s*(?:-\s*(\d{1,6})\s*)?")


def _files(context: ToolCallContext) -> FileAccess:
    return require(context.services.files if context.services else None, "files")


def _describe(info: FileInfo, attached: bool | None = None) -> dict[str, Any]:
    described: dict[str, Any] = {
        "file_id": info.id,
        "name": info.name,
        "media_type": info.media_type,
        "size_bytes": info.size_bytes,
        "created_at": info.created_at.isoformat(timespec="seconds"),
    }
    if info.pages is not None:
        described["pages"] = info.pages
    if info.width is not None and info.height is not None:
        described["width"], described["height"] = info.width, info.height
    if attached is not None:
        described["attached"] = attached
    return described


class ListFilesTool(BaseTool):
    """The tenant's files, those given to the task first and marked `attached`."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name=LIST_FILES,
            type=ToolType.FILE_SYSTEM,
            description="Lists the files you can read: those given to this task first "
            "(attached: true), then the tenant's other files, newest first.",
            parameters={
                "type": "object",
                "properties": {
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 100,
                        "default": 20,
                        "description": "At most this many of the tenant's other files.",
                    }
                },
                "additionalProperties": False,
            },
            returns_description="files: id, name, media type, size, pages or pixel size, "
            "whether attached.",
            timeout_s=15,
            retry=NO_RETRY,
            idempotent=True,
            visibility=ToolVisibilityConfig(summary_template="Listed {count} files"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        files = _files(context)
        listed: list[dict[str, Any]] = []
        unavailable: list[str] = []
        seen: set[str] = set()
        theirs = False
        for file_id in files.attached():
            if file_id in seen:
                continue
            seen.add(file_id)
            try:
                info = await files.info(file_id)
                theirs = theirs or info.theirs
                listed.append(_describe(info, attached=True))
            except ToolError as exc:  # deleted since it was given: said, not fatal
                if exc.error_code is not ErrorCode.NOT_FOUND:
                    raise
                unavailable.append(file_id)
        for info in await files.list_files(limit=int(arguments.get("limit", 20))):
            if info.id not in seen:
                theirs = theirs or info.theirs
                listed.append(_describe(info, attached=False))
        value: dict[str, Any] = {"count": len(listed), "files": listed}
        if unavailable:
            value["unavailable_attached"] = unavailable
        # Names are text their uploaders chose.
        return ToolOutput(value=value, labels=_THEIRS if theirs else frozenset())


class ReadFileTool(BaseTool):
    """A file's text (a PDF's by page range), or an image: its metadata, and the image itself
    for a model that takes images."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name=READ_FILE,
            type=ToolType.FILE_SYSTEM,
            description="Reads a file: the text of a text file or PDF (choose PDF pages with "
            "`pages`, e.g. '2-3'; page through long text with `start`), or an image (its "
            "size, and the image itself when you can see images).",
            parameters={
                "type": "object",
                "properties": {
                    "file_id": _FILE_ID,
                    "pages": {
                        "type": "string",
                        "pattern": r"^\s*\d{1,6}\s*(-\s*\d{1,6}\s*)?$",
                        "description": "PDFs: a page ('4') or a range ('2-3'), from 1.",
                    },
                    "start": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "The character to start at (from next_start).",
                    },
                    "max_chars": {
                        "type": "integer",
                        "minimum": 100,
                        "maximum": MAX_READ_CHARS,
                        "default": DEFAULT_READ_CHARS,
                    },
                },
                "required": ["file_id"],
                "additionalProperties": False,
            },
            returns_description="The text (with where it starts and ends and next_start "
            "when there is more), or for an image {type: image, media_type, width, height} "
            "followed, for a model that takes images, by the image itself.",
            timeout_s=30,
            retry=NO_RETRY,
            idempotent=True,
            private_output=True,
            visibility=ToolVisibilityConfig(summary_template="Read {name}"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        files = _files(context)
        file_id: str = arguments["file_id"]
        info = await files.info(file_id)
        labels = _THEIRS if info.theirs else frozenset()
        if info.media_type.startswith("image/"):
            data = await files.content(file_id)
            value, image = await asyncio.to_thread(image_for_model, data, info.media_type)
            return ToolOutput(
                value={**_describe(info), **value},
                images=() if image is None else (image,),
                labels=labels,
            )
        text = await files.text(file_id)
        if text is None:
            return ToolOutput(
                value={**_describe(info), "note": "a binary file: it has no text to read"},
                labels=labels,
            )
        value = _describe(info)
        if info.media_type == PDF:
            text, value["pages_read"] = _pages(text, arguments.get("pages"))
        elif "pages" in arguments:
            raise InvalidToolArguments(READ_FILE, [FieldError("pages", "only PDFs have pages")])
        start = min(int(arguments.get("start", 0)), len(text))
        end = min(start + int(arguments.get("max_chars", DEFAULT_READ_CHARS)), len(text))
        value.update(
            text=text[start:end],
            start=start,
            end=end,
            total_chars=len(text),
            next_start=end if end < len(text) else None,
        )
        return ToolOutput(value=value, labels=labels)


def _pages(text: str, wanted: str | None) -> tuple[str, str]:
    """The pages `wanted` ('2-3', '4'; all when None) of a PDF's text, each headed by its
    number, and which pages those are."""
    pages = text.split(PAGE_BREAK)
    first, last = 1, len(pages)
    if wanted is not None:
        match = _PAGES.fullmatch(wanted)
        if match is None:
            raise InvalidToolArguments(READ_FILE, [FieldError("pages", "e.g. '2-3' or '4'")])
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        if not 1 <= first <= last <= len(pages):
            message = f"the file has pages 1-{len(pages)}; {wanted.strip()!r} is not among them"
            raise InvalidToolArguments(READ_FILE, [FieldError("pages", message)])
    body = "\n\n".join(f"[page {n}]\n{pages[n - 1]}" for n in range(first, last + 1))
    return body, f"{first}-{last}" if last != first else str(first)


def image_for_model(data: bytes, media_type: str) -> tuple[dict[str, Any], ModelImage | None]:
    """An image's description (`{"type": "image", "width", "height"}`, and how it is passed
    on) and the image a model that takes images is given: as it is when such a model takes it
    so, else scaled down to `MAX_IMAGE_SIDE` and re-encoded. Past `MAX_DECODE_PIXELS`, or
    undecodable, there is no image and a `note` says why."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            value: dict[str, Any] = {"type": "image", "width": width, "height": height}
            if (
                media_type in MODEL_IMAGE_TYPES
                and max(width, height) <= MAX_IMAGE_SIDE
                and len(data) <= MAX_MODEL_IMAGE_BYTES
            ):
                image.load()  # a provider refuses (fails the call on) an image it cannot decode
                return {**value, "image_type": media_type}, ModelImage(media_type, data)
            if width * height > MAX_DECODE_PIXELS:
                return {**value, "note": "too large to pass on as an image"}, None
            image.draft("RGB", (MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
            image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
            alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            converted = image.convert("RGBA" if alpha else "RGB")
    except (OSError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        return {"type": "image", "note": "the image could not be decoded"}, None
    out = io.BytesIO()
    scaled_type = "image/png" if alpha else "image/jpeg"
    converted.save(out, format="PNG" if alpha else "JPEG", **({} if alpha else {"quality": 85}))
    scaled = {"image_type": scaled_type, "scaled_to": [converted.width, converted.height]}
    return {**value, **scaled}, ModelImage(scaled_type, out.getvalue())


class SearchFilesTool(BaseTool):
    """Full-text search over the tenant's text and PDF files, best match first."""

    def __init__(self) -> None:
        self._definition = ToolDefinition(
            name=SEARCH_FILES,
            type=ToolType.FILE_SYSTEM,
            description="Searches the text of the tenant's text and PDF files: words (matched "
            'with their other forms), "exact phrases", `or` between alternatives, -word to '
            "exclude. Gives the best-matching files first, with a snippet of each (matched "
            "words in **bold**); read one with read_file.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 500},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            returns_description="matches: file id, name, media type, rank, snippet.",
            timeout_s=15,
            retry=NO_RETRY,
            idempotent=True,
            private_output=True,
            visibility=ToolVisibilityConfig(summary_template="Found {count} files"),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        files = _files(context)
        attached = set(files.attached())
        matches = await files.search(arguments["query"], limit=int(arguments.get("limit", 5)))
        theirs = any(match.file.theirs for match in matches)
        return ToolOutput(
            labels=_THEIRS if theirs else frozenset(),
            value={
                "query": arguments["query"],
                "count": len(matches),
                "matches": [
                    {
                        "file_id": match.file.id,
                        "name": match.file.name,
                        "media_type": match.file.media_type,
                        "attached": match.file.id in attached,
                        "rank": round(match.rank, 6),
                        "snippet": match.snippet[:MAX_SNIPPET_CHARS],
                    }
                    for match in matches
                ],
            },
        )


def file_tools() -> list[BaseTool]:
    return [ListFilesTool(), ReadFileTool(), SearchFilesTool()]
