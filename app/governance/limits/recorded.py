"""Windows as the durable record has them: where limits are decided while Redis is away."""

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from app.governance.limits.windows import (
    LATE_S,
    Grant,
    History,
    LimitRequest,
    LimitStoreUnavailable,
    OwnEntry,
    Refusal,
    retry_after,
)
from app.ids import uuid4

logger = logging.getLogger(__name__)

OwnEntries = dict[str, tuple[float, dict[str, OwnEntry]]]
"""By window key: its length, and this process's entries of it by grant id."""


@dataclass(slots=True)
class _Recorded:
    entries: dict[str, tuple[float, int]] = field(default_factory=dict)  # id -> (at, amount)
    read_at: float | None = None  # the last read that succeeded
    tried_at: float = 0.0


class RecordedWindows:
    """A window here is what the durable record holds of it (re-read at most every
    `refresh_s`, incrementally) with this process's own entries on top: those it made, settled
    or released since it has been deciding here, by grant id (one the record holds too counts
    once). Every instance doing the same decides on what all of them recorded; what is
    reserved but not yet recorded on another instance (its calls under way) is not seen.

    A window the record keeps nothing of (tool calls per minute) holds only this process's
    entries. When the record cannot be read: windows read before keep their last reading;
    one never read cannot be decided (`LimitStoreUnavailable`)."""

    def __init__(
        self,
        history: History | None,
        *,
        clock: Callable[[], float] = time.time,
        refresh_s: float = 1.0,
    ) -> None:
        self._history = history
        self._clock = clock
        self._refresh_s = refresh_s
        self._recorded: dict[str, _Recorded] = {}
        self._own: OwnEntries = {}
        self._reading = asyncio.Lock()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def acquire(
        self, requests: Sequence[LimitRequest], *, grant_id: str | None = None
    ) -> Grant | Refusal:
        grant_id = grant_id or uuid4().hex
        self._busy += 1
        self._idle.clear()
        try:
            await self._read({r.key: r.window_s for r in requests})
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()
        now = self._clock()
        if requests:
            held = self._own_of(requests[0].key, requests[0].window_s).get(grant_id)
            if held is not None and held.state != "released":
                return Grant(grant_id, tuple(requests), held.at)
        for request in requests:
            entries = self._entries(request.key, now, request.window_s)
            used = sum(amount for _, amount in entries)
            if used + request.amount > request.limit:
                entries.sort()
                return Refusal(request, used, retry_after(entries, request, used, now))
        for request in requests:
            own = self._own_of(request.key, request.window_s)
            own[grant_id] = OwnEntry(now, request.amount, "reserved")
        return Grant(grant_id, tuple(requests), now)

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        self.hold(grant, amounts)

    def hold(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        """Counts a grant as this process's own from now on: settled to `amounts` where they
        name its keys, else as reserved (one made before, elsewhere, keeps its state)."""
        for request in grant.requests:
            own = self._own_of(request.key, request.window_s)
            amount = amounts.get(request.key)
            if amount is not None:
                own[grant.id] = OwnEntry(grant.at, amount, "settled")
            elif grant.id not in own:  # a grant made before: it counts here too
                own[grant.id] = OwnEntry(grant.at, request.amount, "reserved")

    async def release(self, grant: Grant) -> None:
        for request in grant.requests:
            own = self._own_of(request.key, request.window_s)
            own[grant.id] = OwnEntry(grant.at, 0, "released")

    async def usage(self, key: str, window_s: float) -> int:
        await self._read({key: window_s})
        return sum(amount for _, amount in self._entries(key, self._clock(), window_s))

    async def aclose(self) -> None:
        self._recorded.clear()
        self._own.clear()

    async def quiet(self) -> None:
        """Returns once no acquisition is under way here."""
        await self._idle.wait()

    def take(self) -> OwnEntries:
        """This process's entries, handed over (to the shared windows, back now) and
        forgotten here, with what was read of the record."""
        own, self._own = self._own, {}
        self._recorded.clear()
        return own

    def give_back(self, own: OwnEntries) -> None:
        """Entries `take` handed over that could not be handed on; newer ones win."""
        for key, (window_s, entries) in own.items():
            mine = self._own_of(key, window_s)
            for grant_id, entry in entries.items():
                mine.setdefault(grant_id, entry)

    def _own_of(self, key: str, window_s: float) -> dict[str, OwnEntry]:
        return self._own.setdefault(key, (window_s, {}))[1]

    def _entries(self, key: str, now: float, window_s: float) -> list[tuple[float, int]]:
        recorded = self._recorded.get(key)
        merged = dict(recorded.entries) if recorded else {}
        _, own = self._own.get(key, (window_s, {}))
        for grant_id, entry in own.items():
            if entry.state == "released":
                merged.pop(grant_id, None)
            else:
                merged[grant_id] = (entry.at, entry.amount)
        cutoff = now - window_s
        return [(at, amount) for at, amount in merged.values() if at > cutoff and amount]

    async def _read(self, windows: Mapping[str, float]) -> None:
        """Reads the record of the windows named (key: length) not read within `refresh_s`."""
        if self._history is None or not any(self._due(key) for key in windows):
            return
        async with self._reading:
            now = self._clock()
            due = {key: s for key, s in windows.items() if self._due(key)}
            if not due:
                return
            since: dict[str, float] = {}
            for key, window_s in due.items():
                recorded = self._recorded.setdefault(key, _Recorded())
                recorded.tried_at = now
                start = now - window_s
                if recorded.read_at is not None:
                    start = max(start, recorded.read_at - LATE_S)
                since[key] = start
            try:
                past = await self._history(since)
            except LimitStoreUnavailable:
                if any(self._recorded[key].read_at is None for key in due):
                    raise
                logger.warning("reading the record of %d limit windows failed", len(due))
                return
            for key, window_s in due.items():
                recorded = self._recorded[key]
                for entry in past.get(key, ()):
                    recorded.entries[entry.id] = (entry.at, entry.amount)
                cutoff = now - window_s
                recorded.entries = {
                    i: (at, amount) for i, (at, amount) in recorded.entries.items() if at > cutoff
                }
                recorded.read_at = now

    def _due(self, key: str) -> bool:
        recorded = self._recorded.get(key)
        if recorded is None or recorded.read_at is None:
            return True
        return self._clock() - recorded.tried_at >= self._refresh_s
