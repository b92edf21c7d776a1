"""How much a document may cost to read."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """What reading one document may take; a document needing more is refused.

    `cpu_s` is enforced in the reading process (`RLIMIT_CPU`), `timeout_s` by the service
    (the process is killed), `memory_bytes` as the process's address space (`RLIMIT_AS`),
    `max_pages` on the document's page count. `workers` reading processes are kept warm;
    one tenant's documents take at most `tenant_slots` of them at once (where a caller names
    its tenant)."""

    cpu_s: int = 10
    timeout_s: float = 30.0
    memory_bytes: int = 1024 * 1024 * 1024
    max_pages: int = 2_000
    workers: int = 2
    tenant_slots: int = 1
