"""The one exception family that ends a chain with a known error code."""

from typing import Any

from app.chain.enums import ErrorCode
from app.errors import OmniForgeError


class ChainAbort(OmniForgeError):
    """Raised anywhere in a run to end its chain with `error_code`; the chain is kept."""

    def __init__(
        self, error_code: ErrorCode, message: str, *, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.details = details or {}
