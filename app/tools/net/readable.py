"""A fetched body as text a model can read: HTML as Markdown (scripts, styles, navigation and
the like removed, the title kept), PDF as its text, JSON and other text as they are."""

import re
from dataclasses import dataclass
from typing import Literal

from app.tools import documents
from app.tools.errors import ToolError

Kind = Literal["html", "pdf", "text", "binary"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/csv",
        "application/sql",
        "application/graphql",
    }
)
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# Elements that carry no reading matter (or only the site's chrome).
_DROPPED = ["script", "style", "nav", "noscript", "template", "iframe", "svg", "canvas", "head"]
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BLANK_LINES = re.compile(r"\n[ \t]*(\n[ \t]*)+\n")
# How much of a long page is read first (characters of HTML: at least the first, or this many
# per character of text wanted), and how much text past what is wanted makes a prefix enough.
_FIRST_PREFIX_CHARS = 32 * 1024
_PREFIX_PER_CHAR = 4
_MARGIN = 1024


@dataclass(frozen=True, slots=True)
class Readable:
    """What a body says: `text` holds at least the characters asked for (a PDF's pages are
    read only as far as needed), `title` the document's own title if it has one."""

    kind: Kind
    title: str | None
    text: str


def kind_of(media_type: str, body: bytes) -> Kind:
    """How to read a body: by its declared type, sniffed when the type says nothing."""
    if media_type in HTML_TYPES:
        return "html"
    if media_type == "application/pdf":
        return "pdf"
    if media_type.startswith("text/") or media_type in TEXT_TYPES:
        return "text"
    if media_type.endswith(("+json", "+xml")):
        return "text"
    if media_type not in GENERIC_TYPES:
        return "binary"
    if body.startswith(b"%PDF-"):
        return "pdf"
    head = body[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    return "text" if _looks_textual(body) else "binary"


def readable(
    body: bytes, media_type: str, charset: str | None, *, chars: int, truncated: bool
) -> Readable:
    """`body` read by its kind. `chars` is how many characters of text the caller will use: a
    long page or PDF is read only as far as needed for more than that (its `text` is then
    longer than `chars` but not the whole document). `truncated` says the body was cut short.
    Slow on large bodies: run it in a worker thread."""
    kind = kind_of(media_type, body)
    if kind == "html":
        return _html(body, charset, chars)
    if kind == "pdf":
        return _pdf(body, chars, truncated)
    if kind == "text":
        return Readable("text", None, decode_text(body, charset))
    shown = media_type or "unknown"
    return Readable(
        "binary", None, f"[{shown} content, {len(body)} bytes: only text, HTML and PDF are read]"
    )


def _html(body: bytes, charset: str | None, chars: int) -> Readable:
    """Parsing and converting cost ~2 s per MB, so a long page is read from its start only as
    far as the caller needs: a prefix (cut anywhere: the parser closes what it left open) is
    converted, and a four times longer one if it gave too little. The cut's untidy end lies
    past `_MARGIN` characters beyond what the caller uses."""
    if charset is None and (found := _META_CHARSET.search(body[:4096])):
        charset = found.group(1).decode("ascii")
    html = decode_text(body, charset)
    size = max(_FIRST_PREFIX_CHARS, _PREFIX_PER_CHAR * chars)
    while True:
        whole = size >= len(html)
        title, markdown = _markdown(html if whole else html[:size])
        if whole or len(markdown) > chars + _MARGIN:
            return Readable("html", title, markdown)
        size *= 4


def _markdown(html: str) -> tuple[str | None, str]:
    # Imported by the first page read, not by every process that may read one (a service's
    # start-up, 40 ms of CPU).
    from bs4 import BeautifulSoup
    from markdownify import ATX, MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title else None
    for element in soup(_DROPPED):
        element.decompose()
    for image in soup.find_all("img"):
        if str(image.get("src", "")).startswith("data:"):
            del image["src"]  # inline images are kilobytes of base64, nothing to read
    try:
        markdown = MarkdownConverter(heading_style=ATX, bullets="-").convert_soup(soup)
    except RecursionError:  # nested deeper than the converter recurses: the text alone
        markdown = soup.get_text("\n")
    return title or None, _BLANK_LINES.sub("\n\n", markdown).strip()


def _pdf(body: bytes, chars: int, truncated: bool) -> Readable:
    """Read in another process, within the document limits."""
    try:
        read = documents.current().read_pdf(body, stop_chars=chars)
    except documents.DocumentRefused as exc:
        raise ToolError(f"the PDF is not read: {exc.detail}") from None
    problem = read.unreadable or (read.failures[0] if read.failures else None)
    if problem is not None:
        if truncated:
            raise ToolError("the PDF is larger than the download limit and cannot be read in part")
        raise ToolError(f"could not read the PDF: {problem}")
    if read.encrypted:
        raise ToolError("the PDF is encrypted with a password; its text cannot be read")
    pages = [text.strip() for text in read.texts]
    return Readable("pdf", read.title or None, "\n\n".join(pages).strip())


def decode_text(body: bytes, charset: str | None) -> str:
    """`body` as text in `charset` (UTF-8 when unknown); undecodable bytes become U+FFFD."""
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:  # unknown, or not a text encoding ("base64")
            pass
    return body.decode("utf-8", errors="replace")


def _looks_textual(body: bytes) -> bool:
    sample = body[:8192]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # a character cut by the sample's end
    return True
