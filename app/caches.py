"""Short per-process caches of what requests and runs read again and again (tenants, API keys,
secrets, webhook subscriptions): each value is kept for a while, a change made through this
process replaces or drops it at once, and a read that began before such a change is never
stored after it. Used by every layer, so it imports nothing of ours."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Cached(Generic[V]):
    """A hit. Its `value` may be None: "there is none" is cached like any other answer."""

    value: V


class _Loads:
    """The loads of one key: one at a time, counted so that the entry goes once nobody waits."""

    __slots__ = ("lock", "superseded", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0
        # Bumped by each `put` or `invalidate` of the key: a load that saw another number
        # when it began read what they replaced.
        self.superseded = 0


class TtlCache(Generic[K, V]):
    """Values by key, each kept for `ttl_s` from when the read that produced it began (0: none
    is kept, every look-up is a miss), at most `max_entries` at once: storing one more drops
    the oldest (with one `ttl_s` for all, about the next to expire anyway). `clock` is monotonic,
    in seconds.

    `get_or_load` is the usual way in: a hit, or the value `load()` reads, stored unless the
    key was `put` or `invalidate`d while it ran (its caller still gets it). While caching,
    one key is loaded by one caller at a time; those that asked meanwhile get what it stored,
    or load in turn if it stored nothing."""

    def __init__(
        self,
        *,
        ttl_s: float,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("a cache holds at least one entry")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}
        self._loads: dict[K, _Loads] = {}

    def get(self, key: K) -> Cached[V] | None:
        """The key's unexpired value, or None for a miss."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return Cached(entry[1])

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The key's cached value, else what `load()` returns (stored as the class says)."""
        cached = self.get(key)
        if cached is not None:
            return cached.value
        if self.ttl_s <= 0:  # nothing would be stored, so nothing is worth waiting for
            return await load()
        loads = self._loads.get(key)
        if loads is None:
            loads = self._loads[key] = _Loads()
        loads.users += 1
        try:
            async with loads.lock:
                cached = self.get(key)
                if cached is not None:
                    return cached.value  # loaded by the caller before
                began, superseded = self._clock(), loads.superseded
                value = await load()
                if loads.superseded == superseded:
                    self._store(key, value, began)
                return value
        finally:
            loads.users -= 1
            if not loads.users:
                del self._loads[key]

    def put(self, key: K, value: V) -> None:
        """`value` is the key's from now (changed through this process): kept for `ttl_s`,
        and a load under way is not stored over it."""
        self._supersede(key)
        self._store(key, value, self._clock())

    def update(self, key: K, change: Callable[[V], V]) -> None:
        """The cached value becomes `change(value)`, its expiry kept (a detail of the same
        answer changed, such as when a key was last used); nothing when it is not cached.
        A function of what is cached now, not a value: it may have been read again since."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] > self._clock():
            self._entries[key] = (entry[0], change(entry[1]))

    def invalidate(self, key: K) -> None:
        """The key's value changed: its next look-up reads it again, and a load under way
        is not stored."""
        self._supersede(key)
        self._entries.pop(key, None)

    def _supersede(self, key: K) -> None:
        loads = self._loads.get(key)
        if loads is not None:
            loads.superseded += 1

    def _store(self, key: K, value: V, began: float) -> None:
        expires = began + self.ttl_s
        if self.ttl_s <= 0 or expires <= self._clock():
            return
        # Stored last, so that the first entry is always the oldest.
        self._entries.pop(key, None)
        if len(self._entries) >= self.max_entries:  # keys may come from callers: stay bounded
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (expires, value)
