"""Documents (PDF) read in separate processes with CPU-time, wall-time, memory and page
limits: a crafted file costs its reader a bounded amount, never the service's event loop or
its shared threads."""

from app.tools.documents.errors import DocumentRefused, DocumentTooLarge
from app.tools.documents.limits import DocumentLimits
from app.tools.documents.reader import DocumentReader, PdfText
from app.tools.documents.shared import current, install

__all__ = [
    "DocumentLimits",
    "DocumentReader",
    "DocumentRefused",
    "DocumentTooLarge",
    "PdfText",
    "current",
    "install",
]
