"""The windows of this process (one instance, or the tests)."""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.governance.limits.windows import Grant, History, LimitRequest, Refusal, retry_after
from app.ids import uuid4


@dataclass(slots=True)
class _Entry:
    at: float
    amount: int


@dataclass(slots=True)
class _Window:
    entries: "OrderedDict[str, _Entry]" = field(default_factory=OrderedDict)  # oldest first
    total: int = 0

    def put(self, entry_id: str, at: float, amount: int) -> None:
        entries = self.entries
        if entries and at < entries[next(reversed(entries))].at:  # an older one put back
            items = [*entries.items(), (entry_id, _Entry(at, amount))]
            self.entries = OrderedDict(sorted(items, key=lambda item: item[1].at))
        else:
            entries[entry_id] = _Entry(at, amount)
        self.total += amount


class InProcessLimitStore:
    """Windows of this process. A window it has not held yet is filled from `history` (the
    calls recorded before this process started) the first time it is used; after that every
    operation is atomic in the event loop. A key's entries are dropped as they leave its
    window, and an empty key with them."""

    def __init__(
        self, *, history: History | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._history = history
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self._filled: set[str] = set()
        self._filling = asyncio.Lock()

    async def acquire(
        self, requests: Sequence[LimitRequest], *, grant_id: str | None = None
    ) -> Grant | Refusal:
        await self._fill({r.key: r.window_s for r in requests})
        now = self._clock()
        grant_id = grant_id or uuid4().hex
        held = self._windows.get(requests[0].key) if requests else None
        if held is not None and grant_id in held.entries:
            return Grant(grant_id, tuple(requests), held.entries[grant_id].at)
        for request in requests:
            window = self._trimmed(request.key, now, request.window_s)
            used = window.total if window else 0
            if used + request.amount > request.limit:
                entries = window.entries.values() if window else ()
                after = retry_after(((e.at, e.amount) for e in entries), request, used, now)
                return Refusal(request, used, after)
        for request in requests:
            self._windows.setdefault(request.key, _Window()).put(grant_id, now, request.amount)
        return Grant(grant_id, tuple(requests), now)

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        now = self._clock()
        for request in grant.requests:
            amount = amounts.get(request.key)
            window = self._windows.get(request.key)
            entry = window.entries.get(grant.id) if window else None
            if window is not None and entry is not None:
                if amount is not None:
                    window.total += amount - entry.amount
                    entry.amount = amount
            elif grant.at > now - request.window_s:
                window = self._windows.setdefault(request.key, _Window())
                window.put(grant.id, grant.at, request.amount if amount is None else amount)

    async def release(self, grant: Grant) -> None:
        for request in grant.requests:
            window = self._windows.get(request.key)
            entry = window.entries.pop(grant.id, None) if window else None
            if window is not None and entry is not None:
                window.total -= entry.amount
                if not window.entries:
                    del self._windows[request.key]

    async def usage(self, key: str, window_s: float) -> int:
        await self._fill({key: window_s})
        window = self._trimmed(key, self._clock(), window_s)
        return window.total if window else 0

    async def aclose(self) -> None:
        self._windows.clear()

    async def _fill(self, windows: Mapping[str, float]) -> None:
        """Fills the windows named (key: its length) this process has not held yet, once."""
        if all(key in self._filled for key in windows):
            return
        async with self._filling:
            wanted = {key: s for key, s in windows.items() if key not in self._filled}
            if not wanted:
                return
            if self._history is not None:
                now = self._clock()
                past = await self._history({key: now - s for key, s in wanted.items()})
                for key in wanted:
                    for entry in sorted(past.get(key, ()), key=lambda e: e.at):
                        if not entry.amount:
                            continue
                        window = self._windows.setdefault(key, _Window())
                        if entry.id not in window.entries:
                            window.put(entry.id, entry.at, entry.amount)
            self._filled.update(wanted)

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
