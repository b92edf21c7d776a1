"""The metric of deleted content: rows the retention purge and erasures deleted, by table."""

from collections.abc import Mapping
from typing import Literal

from prometheus_client import CollectorRegistry, Counter

Reason = Literal["retention", "erasure"]


class DeletedRows:
    """`omniforge_purged_rows_total{table, reason}`, in the registry `/metrics` renders."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._rows = Counter(
            "omniforge_purged_rows",
            "Rows deleted by the retention purge (reason `retention`) and by erasures of tasks "
            "and conversations (`erasure`), by table",
            ["table", "reason"],
            registry=registry,
        )

    def count(self, deleted: Mapping[str, int], *, reason: Reason) -> None:
        for table, rows in deleted.items():
            if rows:
                self._rows.labels(table=table, reason=reason).inc(rows)
