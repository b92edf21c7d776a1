"""Runner leases: each process that runs tasks is a runner with a lease it renews. Liveness is
judged by lease time alone, by the database's clock: no process ids, no host names. A lapsed
runner's registration is never deleted by another; it is marked released, in the same
transaction that gives its unfinished tasks back to the queue, and a runner finds out at its
next renewal (which then fails) that it must stop its runs."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update

from app.chain.models import utc_now
from app.storage.notify import QUEUE
from app.storage.runs.announce import RunStore
from app.storage.runs.rows import UNFINISHED
from app.storage.tables import runners, tasks

FORGET_AFTER = timedelta(days=1)
"""A released runner's registration is removed this long after its release (a runner that
comes back later finds none, which also tells it its lease is gone)."""


@dataclass(frozen=True, slots=True)
class RunnerLease:
    """This process as a runner of tasks: presumed gone once it has not renewed its lease
    for `lease_s`."""

    id: str
    hostname: str
    pid: int
    started_at: datetime
    lease_s: float


class RunnerLeases(RunStore):
    """Registrations and renewals of runners, and the judgement of lapsed ones."""

    async def register(self, runner: RunnerLease) -> None:
        """Registers `runner`, or takes its registration back if it was released (a runner
        that lost its lease starts over under the same id: the tasks it held were given back,
        and the fences of their old claims refuse whatever its stopped runs still write)."""
        r = runners.c
        async with self.database.transaction() as connection:
            await connection.execute(
                delete(runners).where(r.released_at < utc_now() - FORGET_AFTER)
            )
            rejoined = await connection.execute(
                update(runners)
                .where(r.id == runner.id)
                .values(heartbeat_at=self.now(), released_at=None, lease_s=runner.lease_s)
            )
            if rejoined.rowcount == 0:
                await connection.execute(
                    insert(runners).values(
                        id=runner.id,
                        hostname=runner.hostname,
                        pid=runner.pid,
                        started_at=runner.started_at,
                        heartbeat_at=self.now(),
                        lease_s=runner.lease_s,
                    )
                )

    async def renew(self, runner_id: str) -> bool:
        """Renews the runner's lease; False when it no longer has one (released by another
        runner that judged it lapsed, or removed)."""
        r = runners.c
        async with self.database.transaction() as connection:
            result = await connection.execute(
                update(runners)
                .where(r.id == runner_id, r.released_at.is_(None))
                .values(heartbeat_at=self.now())
            )
        return result.rowcount == 1

    async def remove(self, runner_id: str) -> None:
        """Gives up the runner's own lease (its runs handed back first)."""
        async with self.database.transaction() as connection:
            await connection.execute(delete(runners).where(runners.c.id == runner_id))

    async def release_lapsed(self, me: str, *, judged_over_s: float) -> int:
        """Releases the runners whose lease lapsed — not renewed within their `lease_s` — as
        long as that lease is no longer than `judged_over_s`, how long `me` has itself kept
        its own lease without a break (a runner that could not reach the database either
        proves nothing by its silence: both were cut off alike). Their unfinished tasks go
        back to the queue (a resume each), with those of runners no longer registered or
        already released. Returns how many tasks."""
        r, t = runners.c, tasks.c
        async with self.announcing() as (connection, notes):
            now: datetime = (
                utc_now()
                if self.database.is_sqlite
                else (await connection.execute(select(self.now()))).scalar_one()
            )
            rows = await connection.execute(
                select(r.id, r.heartbeat_at, r.lease_s).where(
                    r.id != me, r.released_at.is_(None), r.lease_s <= judged_over_s
                )
            )
            for row in rows.all():
                if row.heartbeat_at + timedelta(seconds=row.lease_s) >= now:
                    continue
                # Unless it renewed since it was read.
                await connection.execute(
                    update(runners)
                    .where(r.id == row.id, r.heartbeat_at == row.heartbeat_at)
                    .where(r.released_at.is_(None))
                    .values(released_at=now)
                )
            live = select(r.id).where(r.released_at.is_(None))
            released = await connection.execute(
                update(tasks)
                .where(t.status.in_(UNFINISHED), t.runner_id.is_not(None), t.runner_id != me)
                .where(t.runner_id.not_in(live))
                # Counted: a run whose instance keeps dying with it is not resumed for ever.
                .values(runner_id=None, resumes=t.resumes + 1)
                .returning(t.id)
            )
            count = len(released.all())
            if count:
                await notes.send(QUEUE)
        return count

    async def all(self) -> list[Any]:
        async with self.database.read() as connection:
            return list((await connection.execute(select(runners))).all())
