"""The shared windows in Redis, deciding on the durable record while Redis is unreachable."""

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from redis import exceptions as redis_errors

from app.governance.limits.recorded import OwnEntries, RecordedWindows
from app.governance.limits.redis_store import RedisLimitStore
from app.governance.limits.windows import (
    LATE_S,
    Grant,
    History,
    LimitRequest,
    LimitStoreUnavailable,
    PastEntry,
    Refusal,
)
from app.ids import uuid4

logger = logging.getLogger(__name__)

UNREACHABLE = (
    redis_errors.ConnectionError,  # refused, reset, closed; loading after a restart
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,  # a replica, during a fail-over
    redis_errors.OutOfMemoryError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    OSError,
)
"""What says Redis cannot serve the windows now (a retry later may succeed)."""


class ResilientLimitStore:
    """Redis's windows, never failing because Redis is away.

    Policy, for every window (submissions, model calls, tokens, cost, tool calls):
    - Redis healthy: every operation is one script on Redis (nothing more). A window Redis
      lost (restart, fail-over, flush, eviction) is filled from the durable record before it
      admits anything (see `RedisLimitStore`).
    - Redis unreachable (refused, timed out, a stale connection failing again on a new one,
      read-only or out of memory): this process decides on `RecordedWindows` (the durable
      record, re-read at most every second, plus its own entries: those it makes from then
      on, and the grants it made on Redis within the last minute, whose calls may not be
      recorded yet) and stops asking Redis, trying it again after a backoff (`backoff_s`,
      doubling to `max_backoff_s`). No operation raises for it; an acquisition refused there
      is a real refusal. What other instances reserved but have not recorded yet (their calls
      under way) is not seen. Windows the record keeps nothing of (tool calls per minute)
      count only this process's calls then.
    - Redis back: the operation that finds the backoff over pings it; then, while operations
      wait (milliseconds), its own entries of the outage are handed to the windows they touched
      (merged by grant id: reservations Redis lacks, settled amounts, releases), with what the
      durable record holds of those windows since the outage began (so what other instances,
      and any that died meanwhile, spent while Redis was away counts once), and Redis serves
      again. A Redis that came back empty fills each window from the record on first use.
    - Redis and the record both unreachable: a window read before keeps its last reading; one
      never read raises `LimitStoreUnavailable` (an admission answers 503; a call inside a run
      goes ahead, see `QuotaGuard`).
    """

    def __init__(
        self,
        redis: RedisLimitStore,
        fallback: RecordedWindows,
        *,
        history: History | None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        backoff_s: float = 0.25,
        max_backoff_s: float = 1.0,
    ) -> None:
        self._redis = redis
        self._fallback = fallback
        self._history = history
        self._clock = clock
        self._wall_clock = wall_clock
        self._min_backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._backoff = backoff_s
        self._down_since: float | None = None  # wall clock: when Redis was found away
        self._next_try = 0.0
        self._returning: asyncio.Event | None = None

    @property
    def degraded(self) -> bool:
        """Whether this process decides without Redis now."""
        return self._down_since is not None

    async def acquire(
        self, requests: Sequence[LimitRequest], *, grant_id: str | None = None
    ) -> Grant | Refusal:
        grant_id = grant_id or uuid4().hex
        if await self._on_redis():
            try:
                outcome = await self._redis.acquire(requests, grant_id=grant_id)
            except UNREACHABLE as exc:
                self._went_away(exc)
            else:
                if isinstance(outcome, Grant) and self._down_since is not None:
                    self._fallback.hold(outcome, {})  # answered after another found Redis away
                return outcome
        return await self._fallback.acquire(requests, grant_id=grant_id)

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        if await self._on_redis():
            try:
                await self._redis.settle(grant, amounts)
                return
            except UNREACHABLE as exc:
                self._went_away(exc)
        await self._fallback.settle(grant, amounts)

    async def release(self, grant: Grant) -> None:
        if await self._on_redis():
            try:
                await self._redis.release(grant)
                return
            except UNREACHABLE as exc:
                self._went_away(exc)
        await self._fallback.release(grant)

    async def usage(self, key: str, window_s: float) -> int:
        if await self._on_redis():
            try:
                return await self._redis.usage(key, window_s)
            except UNREACHABLE as exc:
                self._went_away(exc)
        return await self._fallback.usage(key, window_s)

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self._fallback.aclose()

    async def _on_redis(self) -> bool:
        """Whether to ask Redis: yes while it serves; after a backoff, if it answers again
        (and then once this process's entries of the outage are handed to it)."""
        while self._returning is not None:
            await self._returning.wait()
        if self._down_since is None:
            return True
        if self._clock() < self._next_try:
            return False
        return await self._come_back(self._down_since)

    async def _come_back(self, down_since: float) -> bool:
        self._next_try = self._clock() + self._backoff  # one attempt at a time
        try:
            await self._redis.ping()
        except UNREACHABLE:
            self._backoff = min(self._backoff * 2, self._max_backoff)
            self._next_try = self._clock() + self._backoff
            return False
        returning = self._returning = asyncio.Event()
        try:
            while True:  # until no entry is left behind, made while handing over included
                await self._fallback.quiet()
                own = self._fallback.take()
                if not own:
                    break
                try:
                    await self._hand_over(own, down_since)
                except (*UNREACHABLE, LimitStoreUnavailable):
                    self._fallback.give_back(own)
                    self._backoff = min(self._backoff * 2, self._max_backoff)
                    self._next_try = self._clock() + self._backoff
                    logger.warning("handing the limit windows back to Redis failed", exc_info=True)
                    return False
            self._down_since = None
            self._backoff = self._min_backoff
            logger.warning("Redis serves the limit windows again")
            return True
        finally:
            self._returning = None
            returning.set()

    async def _hand_over(self, own: OwnEntries, down_since: float) -> None:
        past: Mapping[str, Sequence[PastEntry]] = {}
        if self._history is not None:
            past = await self._history(dict.fromkeys(own, down_since - LATE_S))
        for key, (window_s, entries) in own.items():
            await self._redis.merge(key, window_s, past.get(key, ()), entries)

    def _went_away(self, error: BaseException) -> None:
        if self._down_since is None:
            self._down_since = self._wall_clock()
            self._backoff = self._min_backoff
            self._next_try = self._clock() + self._backoff
            # What the grants made on Redis lately used may not be recorded yet.
            for grant, amounts in self._redis.take_recent():
                self._fallback.hold(grant, amounts)
            logger.warning(
                "Redis is unreachable (%s): limits are decided on the durable record", error
            )
