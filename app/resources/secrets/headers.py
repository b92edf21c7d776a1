"""Secrets sent as headers (by a tenant's MCP servers and remote agents): a value a header
cannot carry is refused before it is stored or sent, in words that show none of it."""

from collections.abc import Mapping
from typing import Any

from app.errors import OmniForgeError
from app.resources.secrets.vault import SecretVault
from app.tools.errors import FieldError


class UnsendableSecret(OmniForgeError):
    """A secret's value that a header naming it cannot carry (after the header's prefix);
    `problems` name each field it comes from (`value`, or `headers.<name>`)."""

    def __init__(self, message: str, problems: list[FieldError]) -> None:
        super().__init__(message)
        self.problems = problems


async def check_headers(
    vault: SecretVault | None, tenant_id: str, headers: Mapping[str, Any]
) -> None:
    """Refuses `headers` (as stored) whose secret's value, after its prefix, a header cannot
    carry, naming each such header: before anything is stored or sent."""
    if vault is None or not headers:
        return
    problems = await vault.unsendable(tenant_id, headers)
    if problems:
        raise UnsendableSecret(
            "a header's secret holds what an HTTP header cannot carry; see `errors`",
            [FieldError(f"headers.{header}", why) for header, why in problems.items()],
        )
