"""The authenticated caller."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller: `subject` (the token's `sub`, or the user who created the API key
    it called with), its tenant and its roles; `api_key` is that key's id."""

    subject: str
    tenant_id: str
    roles: frozenset[str]
    api_key: str | None = None
