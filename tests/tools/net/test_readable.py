"""Bodies become text a model reads: HTML as Markdown without scripts or navigation, PDF as its
text, JSON and text as they are; what cannot be read says so."""

import pytest

from app.tools import documents
from app.tools.errors import ToolError
from app.tools.net import readable
from app.tools.net.readable import kind_of
from tests.tools.documents.bombs import make_pdf_bomb
from tests.tools.net.servers import minimal_pdf

PAGE = b"""<!doctype html>
<html><head><title>The  Title</title><style>p { color: red }</style>
<script>var secret = "script text";</script></head>
<body>
<nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<h1>Main heading</h1>
<p>A paragraph with a <a href="https://example.com/doc">link</a> and <strong>bold</strong>.</p>
<h2>Second</h2>
<ul><li>one</li><li>two</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<noscript>enable javascript</noscript>
<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg" alt="inline">
<img src="/logo.png" alt="logo">
</body></html>"""


def test_html_becomes_markdown_with_headings_links_lists_and_tables() -> None:
    page = readable(PAGE, "text/html", None, chars=10_000, truncated=False)

    assert page.kind == "html"
    assert page.title == "The Title"
    assert page.text.startswith("# Main heading\n\n")
    assert "A paragraph with a [link](https://example.com/doc) and **bold**." in page.text
    assert "## Second" in page.text
    assert "- one\n- two" in page.text
    assert "| k | v |" in page.text
    assert "![logo](/logo.png)" in page.text


def test_scripts_styles_navigation_and_inline_images_are_removed() -> None:
    text = readable(PAGE, "text/html", None, chars=10_000, truncated=False).text

    for gone in ("script text", "color: red", "Home", "About", "enable javascript", "base64"):
        assert gone not in text


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        ('<meta charset="iso-8859-1"><p>caf\xe9</p>'.encode("latin-1"), None),
        ("<p>caf\xe9</p>".encode("cp1252"), "windows-1252"),
        ("<p>café</p>".encode(), None),
    ],
)
def test_the_declared_charset_is_honoured(body: bytes, charset: str | None) -> None:
    assert readable(body, "text/html", charset, chars=100, truncated=False).text == "café"


def test_a_pdf_becomes_its_text_and_title() -> None:
    pdf = minimal_pdf(["First page text", "Second page (with parens)"], title="Report")

    page = readable(pdf, "application/pdf", None, chars=10_000, truncated=False)

    assert page.kind == "pdf"
    assert page.title == "Report"
    assert page.text == "First page text\n\nSecond page (with parens)"


def test_a_pdf_is_read_only_as_far_as_the_caller_needs() -> None:
    pdf = minimal_pdf([f"Page number {n}" for n in range(1, 21)])

    page = readable(pdf, "application/pdf", None, chars=20, truncated=False)

    assert page.text == "Page number 1\n\nPage number 2"


def test_a_pdf_cut_at_the_cap_says_it_cannot_be_read_in_part() -> None:
    pdf = minimal_pdf(["x" * 50] * 5)

    with pytest.raises(ToolError, match="larger than the download limit"):
        readable(pdf[: len(pdf) // 3], "application/pdf", None, chars=1000, truncated=True)


def test_a_broken_pdf_is_a_clear_failure() -> None:
    with pytest.raises(ToolError, match="could not read the PDF"):
        readable(b"%PDF-1.4\nnot really", "application/pdf", None, chars=100, truncated=False)


def test_json_and_text_come_as_they_are() -> None:
    body = b'{"a": [1, 2], "b": "\xc3\xa9"}'

    assert readable(body, "application/json", None, chars=100, truncated=False).text == (
        '{"a": [1, 2], "b": "é"}'
    )
    assert readable(b"plain\ntext", "text/plain", None, chars=100, truncated=False).text == (
        "plain\ntext"
    )


def test_binary_content_is_described_not_returned() -> None:
    page = readable(b"\x89PNG\r\n\x1a\n\x00\x00", "image/png", None, chars=100, truncated=False)

    assert page.kind == "binary"
    assert page.text == "[image/png content, 10 bytes: only text, HTML and PDF are read]"


@pytest.mark.parametrize(
    ("media_type", "body", "kind"),
    [
        ("", b"%PDF-1.7\n...", "pdf"),
        ("application/octet-stream", b"  <!DOCTYPE html><p>x", "html"),
        ("", b"<html><body>x", "html"),
        ("", b"just words", "text"),
        ("application/octet-stream", b"\x00\x01\x02", "binary"),
        ("application/vnd.api+json", b"{}", "text"),
        ("image/svg+xml", b"<svg/>", "text"),
        ("application/zip", b"PK\x03\x04", "binary"),
        ("text/csv", b"a,b", "text"),
    ],
)
def test_a_body_without_a_telling_type_is_sniffed(media_type: str, body: bytes, kind: str) -> None:
    assert kind_of(media_type, body) == kind


def test_an_unknown_or_non_text_charset_falls_back_to_utf8() -> None:
    for charset in ("no-such-charset", "base64"):
        assert readable(b"ok \xc3\xa9", "text/plain", charset, chars=10, truncated=False).text == (
            "ok é"
        )


def test_html_nested_deeper_than_the_converter_recurses_still_gives_its_text() -> None:
    body = b"<div>" * 5000 + b"deep text" + b"</div>" * 5000

    assert readable(body, "text/html", None, chars=100, truncated=False).text == "deep text"


def test_a_long_page_is_read_only_as_far_as_needed_and_reads_the_same() -> None:
    sections = "".join(
        f"<h2>Part {n}</h2><p>Text of part {n} with <a href='/p/{n}'>a link</a>.</p><ul>"
        f"<li>point {n}</li></ul><table><tr><td>{n}</td></tr></table>"
        for n in range(1500)
    )
    body = f"<html><head><title>Long</title></head><body>{sections}</body></html>".encode()
    assert len(body) > 128 * 1024 + 50_000  # past the first prefix read

    whole = readable(body, "text/html", None, chars=len(body), truncated=False)
    start = readable(body, "text/html", None, chars=2000, truncated=False)

    assert 2000 < len(start.text) < len(whole.text)
    assert start.text[:2000] == whole.text[:2000]
    assert start.title == whole.title == "Long"
    assert whole.text.endswith("| 1499 |")


def test_a_pdf_bomb_is_a_clear_tool_error_within_its_limit() -> None:
    reader = documents.DocumentReader(documents.DocumentLimits(cpu_s=1, workers=1))
    stop = documents.install(reader)
    try:
        with pytest.raises(ToolError, match="more than 1 s of CPU time"):
            readable(make_pdf_bomb(), "application/pdf", None, chars=10_000, truncated=False)
    finally:
        stop()
