"""Documents made for tests, never checked in: PDFs with text on each page, images."""

import io
from collections.abc import Sequence

from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import DictionaryObject, NameObject, StreamObject


def make_pdf(pages: Sequence[str]) -> bytes:
    """A PDF whose page n shows `pages[n]` (one line per line), in Helvetica."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        lines = [
            b"("
            + line.encode("latin-1")
            .replace(b"\\", b"\\\\")
            .replace(b"(", b"\\(")
            .replace(b")", b"\\)")
            + b") Tj T*"
            for line in text.split("\n")
        ]
        stream = StreamObject()
        stream.set_data(b"BT /F1 12 Tf 14 TL 72 720 Td " + b" ".join(lines) + b" ET")
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_image(width: int, height: int, image_format: str = "PNG", mode: str = "RGB") -> bytes:
    """An image of a colour gradient (so that it does not compress to nothing)."""
    image = Image.new(mode, (width, height))
    if mode in ("RGB", "RGBA"):
        image.putdata(
            [
                (x * 255 // max(width, 1), y * 255 // max(height, 1), 128, 200)[: len(mode)]
                for y in range(height)
                for x in range(width)
            ]
        )
    out = io.BytesIO()
    image.save(out, format=image_format)
    return out.getvalue()
