"""The retention purge: every tenant's finished tasks, idle conversations and files past its
`retention_days`, and its audit events past its `audit_retention_days`, deleted a small batch
per short transaction (a run's writes never wait long behind one), by one instance of the
cluster at a time. The daily usage roll-up stays, and the costs of deleted tasks are kept as
daily sums (`purged_costs`): cost and usage reports of old periods stay exact."""

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from app.chain.models import utc_now
from app.governance.audit import AuditAction, audit_row
from app.governance.deletions import DeletedRows
from app.storage.audit import AuditRepository
from app.storage.database import Database
from app.storage.erasure import delete_audit_before, delete_tasks
from app.storage.files import FileStore
from app.storage.records import TenantRecord
from app.storage.retention import RetentionRepository
from app.storage.tables import conversations, files
from app.storage.tenants import TenantRepository

logger = logging.getLogger(__name__)

# The cluster-wide lock of the purge (Postgres advisory lock key): "omniforge purge".
_LOCK_KEY = 0x6F6D6E6970757267
ACTOR = "retention"
"""The audit events' actor of what the purge deletes."""
_FIRST_RUN_WITHIN_S = 3600.0


@dataclass(frozen=True, slots=True)
class RetentionDefaults:
    """The platform's periods, for tenants that set none."""

    retention_days: int
    audit_retention_days: int


@dataclass(slots=True)
class TenantPurge:
    """What a purge run did of one tenant: the rows deleted per table, in how many batches
    (transactions that found something to delete)."""

    deleted: Counter[str] = field(default_factory=Counter)
    batches: int = 0


@dataclass(slots=True)
class PurgeReport:
    """What one purge run did, per tenant it deleted anything of."""

    tenants: dict[str, TenantPurge] = field(default_factory=dict)
    # Another instance was purging: this run did nothing.
    skipped: bool = False

    @property
    def deleted(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for tenant in self.tenants.values():
            total.update(tenant.deleted)
        return total


def periods(record: TenantRecord, defaults: RetentionDefaults) -> tuple[int, int]:
    """A tenant's retention and audit retention, in days."""
    return (
        record.retention_days or defaults.retention_days,
        record.audit_retention_days or defaults.audit_retention_days,
    )


class Purge:
    """Deletes what every tenant keeps past its retention. `run()` purges once (tests call it;
    `start()` runs it every `interval_s`); `clock` says what time it is."""

    def __init__(
        self,
        database: Database,
        *,
        defaults: RetentionDefaults,
        batch_size: int,
        file_store: FileStore | None,
        deleted_rows: DeletedRows,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._database = database
        self._defaults = defaults
        self._batch_size = batch_size
        self._file_store = file_store
        self._deleted_rows = deleted_rows
        self._clock = clock
        self._running = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    def start(self, interval_s: float) -> None:
        """Purges every `interval_s` (0: never), first within the hour: instances started
        together do not all try at once, and a restart does not postpone the purge."""
        if interval_s > 0 and self._timer is None:
            self._timer = asyncio.create_task(self._every(interval_s), name="retention-purge")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None

    async def _every(self, interval_s: float) -> None:
        delay = random.uniform(0, min(interval_s, _FIRST_RUN_WITHIN_S))
        while True:
            await asyncio.sleep(delay)
            try:
                report = await self.run()
            except Exception:
                logger.exception("the retention purge failed; it runs again in %.0f s", interval_s)
            else:
                if report.deleted:
                    logger.info("retention purge deleted %s", dict(report.deleted))
            delay = interval_s

    async def run(self) -> PurgeReport:
        """Purges every tenant once, unless another instance is purging (`skipped`)."""
        async with self._running, self._cluster_lock() as held:
            report = PurgeReport(skipped=not held)
            if held:
                async for tenant in self._tenants():
                    await self._purge_tenant(tenant, report)
            return report

    @contextlib.asynccontextmanager
    async def _cluster_lock(self) -> AsyncIterator[bool]:
        """Whether this process may purge now. On Postgres a session advisory lock, held on
        a connection of its own while the batches commit on others; the embedded database
        has one process."""
        if self._database.is_sqlite:
            yield True
            return
        async with self._database.autocommit() as connection:
            held = bool(await connection.scalar(select(func.pg_try_advisory_lock(_LOCK_KEY))))
            try:
                yield held
            finally:
                if held:
                    await connection.scalar(select(func.pg_advisory_unlock(_LOCK_KEY)))

    async def _tenants(self) -> AsyncIterator[TenantRecord]:
        after: str | None = None
        while True:
            async with self._database.read() as connection:
                page = await TenantRepository(connection).page(after=after, limit=100)
            for record in page[:100]:
                yield record
            if len(page) <= 100:
                return
            after = page[99].id

    async def _purge_tenant(self, tenant: TenantRecord, report: PurgeReport) -> None:
        now = self._clock()
        days, audit_days = periods(tenant, self._defaults)
        cutoff, audit_cutoff = now - timedelta(days=days), now - timedelta(days=audit_days)
        purged = TenantPurge()
        deleted = purged.deleted

        async def tasks(repository: RetentionRepository) -> int:
            ids = await repository.expired_tasks(cutoff, limit=self._batch_size)
            deleted.update(await delete_tasks(repository.connection, tenant.id, ids, at=now))
            return len(ids)

        async def idle_conversations(repository: RetentionRepository) -> int:
            ids = await repository.expired_conversations(cutoff, limit=self._batch_size)
            if ids:
                turns = await repository.turns(ids)
                deleted.update(await delete_tasks(repository.connection, tenant.id, turns, at=now))
                deleted[conversations.name] += await repository.delete_conversations(ids)
            return len(ids)

        async def audit(repository: RetentionRepository) -> int:
            count = await delete_audit_before(
                repository.connection, tenant.id, audit_cutoff, limit=self._batch_size
            )
            deleted["audit_events"] += count
            return count

        await self._batches(tenant.id, tasks, purged)
        await self._batches(tenant.id, idle_conversations, purged)
        await self._purge_files(tenant.id, cutoff, purged)
        await self._batches(tenant.id, audit, purged)
        purged.deleted = +deleted  # without the tables it found nothing in
        if purged.deleted:
            self._deleted_rows.count(purged.deleted, reason="retention")
            report.tenants[tenant.id] = purged
            await self._audit(tenant.id, now, cutoff, audit_cutoff, purged.deleted)

    async def _batches(
        self,
        tenant_id: str,
        batch: Callable[[RetentionRepository], Awaitable[int]],
        purged: TenantPurge,
    ) -> None:
        """Runs `batch` in a transaction of its own until one finds less than a full batch."""
        while True:
            async with self._database.transaction() as connection:
                found = await batch(RetentionRepository(connection, tenant_id))
            if found:
                purged.batches += 1
            if found < self._batch_size:
                return

    async def _purge_files(self, tenant_id: str, cutoff: datetime, purged: TenantPurge) -> None:
        while True:
            async with self._database.transaction() as connection:
                repository = RetentionRepository(connection, tenant_id)
                ids = await repository.expired_files(cutoff, limit=self._batch_size)
                records = await repository.delete_files(ids)
            if records:
                purged.batches += 1
                purged.deleted[files.name] += len(records)
            if self._file_store is not None:
                # Their rows are gone: no reader finds these bytes any more.
                for record in records:
                    await self._file_store.delete(record.id.hex)
            if len(ids) < self._batch_size:
                return

    async def _audit(
        self,
        tenant_id: str,
        now: datetime,
        cutoff: datetime,
        audit_cutoff: datetime,
        deleted: Counter[str],
    ) -> None:
        details: dict[str, Any] = {
            "deleted": dict(sorted(deleted.items())),
            "finished_before": cutoff.isoformat(),
            "audit_before": audit_cutoff.isoformat(),
        }
        row = audit_row(
            actor=ACTOR,
            action=AuditAction.RETENTION_PURGE,
            resource_type="tenant",
            resource_id=tenant_id,
            details=details,
            at=now,
        )
        async with self._database.transaction() as connection:
            await AuditRepository(connection, tenant_id).append([row])
