"""The authenticated caller."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller: `subject` (the token's `sub`), its tenant and its roles."""

    subject: str
    tenant_id: str
    roles: frozenset[str]
