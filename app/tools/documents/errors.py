"""Why a document was not read. Knows nothing of HTTP: the API and the tools say it their way."""

from typing import Literal

from app.errors import OmniForgeError

Reason = Literal["cpu_time", "timeout", "memory", "pages", "crashed"]


class DocumentRefused(OmniForgeError):
    """Reading the document would take more than its limits allow (CPU time, wall time), or
    the reading process failed on it."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class DocumentTooLarge(DocumentRefused):
    """The document is larger than this service reads: more pages, or more memory to read."""
