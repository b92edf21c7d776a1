"""PDFs that cost their reader, made for tests, never checked in.

A "PDF bomb": one compressed content stream, shared by every page, of hundreds of thousands
of tiny text-showing operators (`(a) Tj`). It deflates a thousandfold: about 4.5 KB for six
pages, yet pypdf spends about 4 s of CPU per page extracting its text (measured on the
2-core machine this service is tested on).
"""

import io
import zlib

from pypdf import PdfWriter
from pypdf.generic import DictionaryObject, NameObject, StreamObject

BOMB_OPERATORS = 300_000


def make_pdf_bomb(pages: int = 6, operators: int = BOMB_OPERATORS) -> bytes:
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
    stream = StreamObject()
    stream._data = zlib.compress(b"BT /F1 12 Tf " + b"(a) Tj " * operators + b"ET", 9)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    content = writer._add_object(stream)
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page[NameObject("/Contents")] = content
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
