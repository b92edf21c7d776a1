"""The limit store: sliding windows of amounts (calls, tokens, cost) with reservations.

A caller acquires several windows at once (all or nothing), later settles each to the real
amount or releases them all. Windows slide: what counts is the sum of the entries younger than
the window, each entry keeping the time it was acquired. Two backends: in this process (one
instance) and Redis (every instance shares the windows; each operation is one Lua script, so
atomic across processes).
"""

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any, Protocol
from uuid import uuid4

COST_UNIT = Decimal("1e-9")
"""Cost windows count in units of 1e-9 USD: exact integers, in Redis too (whose scripts compute
in doubles, exact up to 2**53 units, about 9 million USD per window)."""


def cost_units(usd: Decimal) -> int:
    """`usd` in COST_UNITs, rounded up: a reservation never under-counts."""
    return int((usd / COST_UNIT).to_integral_value(rounding=ROUND_CEILING))


def usd_of_units(units: int) -> Decimal:
    return Decimal(units) * COST_UNIT


@dataclass(frozen=True, slots=True)
class LimitRequest:
    """`amount` against the window `key` holding at most `limit` per `window_s` seconds."""

    key: str
    amount: int
    limit: int
    window_s: float
    name: str  # the limit as users know it, reported on refusal

    def __post_init__(self) -> None:
        if self.amount < 0 or self.limit <= 0 or self.window_s <= 0:
            raise ValueError(f"invalid limit request {self}")


@dataclass(frozen=True, slots=True)
class Grant:
    """Entries recorded by one acquisition, one per request, sharing `id`."""

    id: str
    requests: tuple[LimitRequest, ...]
    at: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """The first window that refused; `retry_after_s` is how long until enough of its entries
    leave it for this request to fit (None: its amount alone is over the limit)."""

    request: LimitRequest
    used: int
    retry_after_s: float | None


class LimitStore(Protocol):
    # Whether windows outlive the processes using them (then nothing needs `seed`).
    durable: bool

    async def acquire(self, requests: Sequence[LimitRequest]) -> Grant | Refusal:
        """Records every request, or none when any window would go over its limit."""
        ...

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        """Sets the grant's entries of the keys named to their real amounts, keeping their
        time; entries that left their window are ignored. Idempotent."""
        ...

    async def release(self, grant: Grant) -> None:
        """Removes every entry of the grant (a call that did not happen). Idempotent."""
        ...

    async def usage(self, key: str, window_s: float) -> int:
        """What the window holds now."""
        ...

    async def seed(self, key: str, entries: Sequence[tuple[float, int]]) -> bool:
        """Fills a window this store has never held with past entries (time, amount), e.g.
        the calls recorded before this process started; False, doing nothing, when it holds
        the window already or keeps windows across restarts itself."""
        ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class _Entry:
    at: float
    amount: int


@dataclass(slots=True)
class _Window:
    entries: "OrderedDict[str, _Entry]" = field(default_factory=OrderedDict)
    total: int = 0


class InProcessLimitStore:
    """Windows of this process. Operations never await, so each is atomic in the event loop;
    a key's entries are dropped as they leave its window, and an empty key with them."""

    durable = False

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self._seeded: set[str] = set()

    async def acquire(self, requests: Sequence[LimitRequest]) -> Grant | Refusal:
        now = self._clock()
        for request in requests:
            window = self._trimmed(request.key, now, request.window_s)
            used = window.total if window else 0
            if used + request.amount > request.limit:
                return Refusal(request, used, _retry_after(window, request, used, now))
        grant = Grant(uuid4().hex, tuple(requests), now)
        for request in requests:
            window = self._windows.setdefault(request.key, _Window())
            window.entries[grant.id] = _Entry(now, request.amount)
            window.total += request.amount
        return grant

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        for key, amount in amounts.items():
            window = self._windows.get(key)
            entry = window.entries.get(grant.id) if window else None
            if window is not None and entry is not None:
                window.total += amount - entry.amount
                entry.amount = amount

    async def release(self, grant: Grant) -> None:
        for request in grant.requests:
            window = self._windows.get(request.key)
            entry = window.entries.pop(grant.id, None) if window else None
            if window is not None and entry is not None:
                window.total -= entry.amount
                if not window.entries:
                    del self._windows[request.key]

    async def usage(self, key: str, window_s: float) -> int:
        window = self._trimmed(key, self._clock(), window_s)
        return window.total if window else 0

    async def seed(self, key: str, entries: Sequence[tuple[float, int]]) -> bool:
        if key in self._seeded or key in self._windows:
            return False
        self._seeded.add(key)
        window = _Window()
        for index, (at, amount) in enumerate(sorted(entries)):
            if amount:
                window.entries[f"seed-{index}"] = _Entry(at, amount)
                window.total += amount
        if window.entries:
            self._windows[key] = window
        return True

    async def aclose(self) -> None:
        self._windows.clear()

    def _trimmed(self, key: str, now: float, window_s: float) -> _Window | None:
        window = self._windows.get(key)
        if window is None:
            return None
        cutoff = now - window_s
        entries = window.entries
        while entries:
            entry = entries[next(iter(entries))]
            if entry.at > cutoff:
                break
            entries.popitem(last=False)
            window.total -= entry.amount
        if not entries:
            del self._windows[key]
            return None
        return window


def _retry_after(
    window: _Window | None, request: LimitRequest, used: int, now: float
) -> float | None:
    if request.amount > request.limit or window is None:
        return None
    needed = used + request.amount - request.limit
    freed = 0
    for entry in window.entries.values():  # oldest first
        freed += entry.amount
        if freed >= needed:
            return max(entry.at + request.window_s - now, 0.0)
    return None


# Per window key K: a sorted set K:z (grant id -> time), a hash K:a (grant id -> amount) and
# the window's total K:t. Each script first drops the entries that left the window.
_TRIM = """
local function trim(z, a, t, cutoff)
  while true do  -- in chunks: unpack() takes a few thousand values at most
    local gone = redis.call('ZRANGEBYSCORE', z, '-inf', cutoff, 'LIMIT', 0, 1000)
    if #gone == 0 then break end
    local sum = 0
    for _, v in ipairs(redis.call('HMGET', a, unpack(gone))) do
      if v then sum = sum + tonumber(v) end
    end
    redis.call('HDEL', a, unpack(gone))
    redis.call('ZREM', z, unpack(gone))
    if sum ~= 0 then redis.call('DECRBY', t, sum) end
  end
  return tonumber(redis.call('GET', t) or '0')
end
"""

_ACQUIRE = (
    _TRIM
    + """
local now, id, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
for i = 0, n - 1 do
  local z, a, t = KEYS[3*i+1], KEYS[3*i+2], KEYS[3*i+3]
  local amount, limit, window = tonumber(ARGV[4+3*i]), tonumber(ARGV[5+3*i]), tonumber(ARGV[6+3*i])
  local used = trim(z, a, t, now - window)
  if used + amount > limit then
    local retry = ''
    if amount <= limit then
      local needed, freed = used + amount - limit, 0
      local entries = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
      for j = 1, #entries, 2 do
        freed = freed + tonumber(redis.call('HGET', a, entries[j]) or '0')
        if freed >= needed then
          retry = tostring(math.max(tonumber(entries[j+1]) + window - now, 0))
          break
        end
      end
    end
    return {tostring(i), tostring(used), retry}
  end
end
for i = 0, n - 1 do
  local z, a, t = KEYS[3*i+1], KEYS[3*i+2], KEYS[3*i+3]
  local amount, ttl = ARGV[4+3*i], math.ceil(tonumber(ARGV[6+3*i])) + 1
  redis.call('ZADD', z, now, id)
  redis.call('HSET', a, id, amount)
  redis.call('INCRBY', t, amount)
  redis.call('EXPIRE', z, ttl)
  redis.call('EXPIRE', a, ttl)
  redis.call('EXPIRE', t, ttl)
end
return {}
"""
)

_SETTLE = """
local id = ARGV[1]
for i = 0, #KEYS / 3 - 1 do
  local z, a, t = KEYS[3*i+1], KEYS[3*i+2], KEYS[3*i+3]
  local old = redis.call('HGET', a, id)
  if old then
    local new = ARGV[2+i]
    redis.call('HSET', a, id, new)
    redis.call('INCRBY', t, tonumber(new) - tonumber(old))
  end
end
return 0
"""

_RELEASE = """
local id = ARGV[1]
for i = 0, #KEYS / 3 - 1 do
  local z, a, t = KEYS[3*i+1], KEYS[3*i+2], KEYS[3*i+3]
  local old = redis.call('HGET', a, id)
  if old then
    redis.call('HDEL', a, id)
    redis.call('ZREM', z, id)
    redis.call('DECRBY', t, old)
  end
end
return 0
"""

_USAGE = (
    _TRIM
    + """
return trim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]) - tonumber(ARGV[2]))
"""
)


class RedisLimitStore:
    """Windows in Redis, shared by every instance using the same Redis and `prefix`. Each
    operation is one Lua script: atomic across processes. Times are the instances' clocks
    (passed into the scripts, so keep instances NTP-synchronised); keys expire one window
    after their last write, so abandoned windows disappear. The keys of one acquisition must
    live on one Redis node (no Redis Cluster slot spreading)."""

    durable = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "omniforge:limits:",
        clock: Callable[[], float] = time.time,
    ) -> None:
        from redis.asyncio import Redis  # only needed when Redis is configured

        self._redis: Any = Redis.from_url(url)
        self._prefix = prefix
        self._clock = clock
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._settle = self._redis.register_script(_SETTLE)
        self._release = self._redis.register_script(_RELEASE)
        self._usage = self._redis.register_script(_USAGE)

    def _keys(self, key: str) -> list[str]:
        base = self._prefix + key
        return [f"{base}:z", f"{base}:a", f"{base}:t"]

    async def acquire(self, requests: Sequence[LimitRequest]) -> Grant | Refusal:
        now = self._clock()
        grant_id = uuid4().hex
        keys = [k for request in requests for k in self._keys(request.key)]
        args: list[Any] = [repr(now), grant_id, len(requests)]
        for request in requests:
            args += [request.amount, request.limit, repr(float(request.window_s))]
        reply = await self._acquire(keys=keys, args=args)
        if not reply:
            return Grant(grant_id, tuple(requests), now)
        index, used, retry = (part.decode() for part in reply)
        return Refusal(requests[int(index)], int(float(used)), float(retry) if retry else None)

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        keys = [k for key in amounts for k in self._keys(key)]
        if keys:
            await self._settle(keys=keys, args=[grant.id, *amounts.values()])

    async def release(self, grant: Grant) -> None:
        keys = [k for request in grant.requests for k in self._keys(request.key)]
        if keys:
            await self._release(keys=keys, args=[grant.id])

    async def usage(self, key: str, window_s: float) -> int:
        used = await self._usage(keys=self._keys(key), args=[repr(self._clock()), window_s])
        return int(used)

    async def seed(self, key: str, entries: Sequence[tuple[float, int]]) -> bool:
        return False  # Redis keeps its windows across restarts of the instances

    async def aclose(self) -> None:
        await self._redis.aclose()


def make_limit_store(redis_url: str | None) -> LimitStore:
    """Redis when a URL is given (every instance shares the windows), else this process."""
    if redis_url:
        return RedisLimitStore(redis_url)
    return InProcessLimitStore()
