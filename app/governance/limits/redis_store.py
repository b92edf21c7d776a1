"""The windows in Redis, shared by every instance: a cache whose truth is the durable record."""

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.governance.limits import redis_scripts
from app.governance.limits.windows import (
    LATE_S,
    Grant,
    History,
    LimitRequest,
    LimitStoreUnavailable,
    OwnEntry,
    PastEntry,
    Refusal,
)
from app.ids import uuid4

_FILL_ROUNDS = 3  # a window lost again while it was being filled is filled again, twice
_MODES = {"reserved": "k", "settled": "s", "released": "d"}


class RedisLimitStore:
    """Windows in Redis, shared by every instance using the same Redis and `prefix`. Each
    operation is one Lua script: atomic across processes, and safe to send twice (a grant
    has its id, settling sets amounts, filling adds only entries a window lacks), so a command
    whose connection failed is retried once on a new one (a stale pooled connection after a
    Redis restart); a second failure is raised (`RedisError`).

    Redis is a cache of the windows: a window key it no longer holds (restart, fail-over,
    flush, eviction; see `redis_scripts`) is found so inside the script of the operation, and
    filled from `history` (entries by their grants' ids, so instances filling it at once count
    each once) and from the grants this client made within `LATE_S` (which the record may not
    hold yet) before it admits anything; no history: it starts empty. A grant's entry lost
    while its call ran is also put back when the call settles.

    Times are the instances' clocks (passed into the scripts, so keep instances NTP-
    synchronised); keys expire one window after their last write. The keys of one acquisition
    must live on one Redis node (no Redis Cluster slot spreading)."""

    def __init__(
        self,
        url: str,
        *,
        history: History | None = None,
        prefix: str = "omniforge:windows:",
        clock: Callable[[], float] = time.time,
        chunk: int = 2_000,
        connect_timeout_s: float = 1.0,
        timeout_s: float = 2.0,
    ) -> None:
        self._redis: Any = Redis.from_url(
            url,
            retry=Retry(NoBackoff(), 1),
            socket_connect_timeout=connect_timeout_s,
            socket_timeout=timeout_s,
        )
        self._history = history
        self._prefix = prefix
        self._clock = clock
        self._chunk = chunk  # entries per script when filling or merging a window
        register = self._redis.register_script
        self._acquire = register(redis_scripts.ACQUIRE)
        self._fill_script = register(redis_scripts.FILL)
        self._settle = register(redis_scripts.SETTLE)
        self._release = register(redis_scripts.RELEASE)
        self._usage = register(redis_scripts.USAGE)
        self._merge = register(redis_scripts.MERGE)
        # The grants made here lately, oldest first, with the amounts they settled to.
        self._recent: OrderedDict[str, tuple[Grant, dict[str, int]]] = OrderedDict()

    def _keys(self, key: str) -> list[str]:
        base = self._prefix + key
        return [f"{base}:z", f"{base}:a"]

    async def acquire(
        self, requests: Sequence[LimitRequest], *, grant_id: str | None = None
    ) -> Grant | Refusal:
        grant_id = grant_id or uuid4().hex
        keys = [k for request in requests for k in self._keys(request.key)]
        for _ in range(_FILL_ROUNDS):
            now = self._clock()
            args: list[Any] = [repr(now), grant_id, len(requests)]
            for request in requests:
                args += [request.amount, request.limit, repr(float(request.window_s))]
            outcome, *rest = (part.decode() for part in await self._acquire(keys=keys, args=args))
            if outcome == "granted":
                grant = Grant(grant_id, tuple(requests), now)
                self._made(grant)
                return grant
            if outcome == "refused":
                index, used, retry = rest
                return Refusal(requests[int(index)], int(used), float(retry) if retry else None)
            await self._fill({requests[int(i)].key: requests[int(i)].window_s for i in rest})
        raise LimitStoreUnavailable("the limit windows were lost again while being filled")

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        if not amounts:
            return
        keys: list[str] = []
        args: list[Any] = [grant.id, repr(self._clock()), repr(grant.at)]
        for request in grant.requests:
            keys += self._keys(request.key)
            amount = amounts.get(request.key)
            mode = "r" if amount is None else "s"
            args += [request.amount if amount is None else amount, mode, repr(request.window_s)]
        await self._settle(keys=keys, args=args)
        recent = self._recent.get(grant.id)
        if recent is not None:
            recent[1].update(amounts)

    async def release(self, grant: Grant) -> None:
        keys = [k for request in grant.requests for k in self._keys(request.key)]
        if keys:
            await self._release(keys=keys, args=[grant.id])
        self._recent.pop(grant.id, None)

    async def usage(self, key: str, window_s: float) -> int:
        for _ in range(_FILL_ROUNDS):
            args = [repr(self._clock()), repr(float(window_s))]
            used = int(await self._usage(keys=self._keys(key), args=args))
            if used >= 0:
                return used
            await self._fill({key: window_s})
        raise LimitStoreUnavailable("the limit windows were lost again while being filled")

    async def merge(
        self,
        key: str,
        window_s: float,
        past: Sequence[PastEntry],
        own: Mapping[str, OwnEntry],
    ) -> None:
        """Adds to a window what it missed while this process could not reach it: the
        durable record's entries of that time it lacks, and this process's own changes
        (reservations it lacks, settled amounts, releases)."""
        changes: list[list[Any]] = [[e.id, repr(e.at), e.amount, "k"] for e in past if e.amount]
        changes += [[i, repr(e.at), e.amount, _MODES[e.state]] for i, e in own.items()]
        for start in range(0, len(changes), self._chunk):
            args: list[Any] = [repr(self._clock()), repr(float(window_s))]
            for change in changes[start : start + self._chunk]:
                args += change
            await self._merge(keys=self._keys(key), args=args)

    async def ping(self) -> None:
        await self._redis.ping()

    def take_recent(self) -> list[tuple[Grant, dict[str, int]]]:
        """The grants made here within `LATE_S`, with their settled amounts, forgotten here
        (they count elsewhere now)."""
        recent = list(self._recent.values())
        self._recent.clear()
        return recent

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _made(self, grant: Grant) -> None:
        recent = self._recent
        recent[grant.id] = (grant, {})
        cutoff = self._clock() - LATE_S
        while recent and next(iter(recent.values()))[0].at < cutoff:
            recent.popitem(last=False)

    def _recent_entries(self, key: str) -> list[PastEntry]:
        entries = []
        for grant, amounts in self._recent.values():
            for request in grant.requests:
                if request.key == key:
                    amount = amounts.get(key, request.amount)
                    entries.append(PastEntry(grant.id, grant.at, amount))
        return entries

    async def _fill(self, windows: Mapping[str, float]) -> None:
        """Fills the windows named (key: its length) from the durable record, in chunks; a
        window another instance filled meanwhile is left as it is."""
        now = self._clock()
        past: Mapping[str, Sequence[PastEntry]] = {}
        if self._history is not None:
            past = await self._history({key: now - s for key, s in windows.items()})
        for key, window_s in windows.items():
            found = {entry.id: entry for entry in self._recent_entries(key)}
            found.update((entry.id, entry) for entry in past.get(key, ()))  # the record wins
            entries = sorted((e for e in found.values() if e.amount), key=lambda e: e.at)
            size = self._chunk
            chunks = [entries[i : i + size] for i in range(0, len(entries), size)] or [[]]
            for index, chunk in enumerate(chunks):
                first, last = int(index == 0), int(index == len(chunks) - 1)
                args: list[Any] = [repr(now), repr(float(window_s)), first, last]
                for entry in chunk:
                    args += [entry.id, repr(entry.at), entry.amount]
                if not await self._fill_script(keys=self._keys(key), args=args):
                    break  # filled by another instance meanwhile
