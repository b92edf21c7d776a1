"""What the limit stores share: sliding windows of amounts, the requests against them, grants
and refusals, the durable record windows are filled from, and the store protocol."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Literal, Protocol

from app.errors import OmniForgeError

COST_UNIT = Decimal("1e-9")
"""Cost windows count in units of 1e-9 USD: exact integers, in Redis too (whose scripts compute
in doubles, exact up to 2**53 units, about 9 million USD per window)."""


LATE_S = 60.0
"""How long after the time it carries an entry may reach the durable record (a run's writer
stores cost records in batches): reads of the record overlap by this much, and a store keeps
the grants it made this long, to fill a lost window with those the record may lack."""


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


@dataclass(frozen=True, slots=True)
class PastEntry:
    """An amount the durable record holds for a window: `id` is the id its grant had (a
    call's correlation id, a task's id), so a window holding that grant already does not
    count it twice."""

    id: str
    at: float
    amount: int


@dataclass(frozen=True, slots=True)
class OwnEntry:
    """What this process did to a grant's entry of a window while the shared windows were
    unreachable: reserved it, settled it to its real amount, or released it (amount 0)."""

    at: float
    amount: int
    state: Literal["reserved", "settled", "released"]


class History(Protocol):
    """The durable record of windows (the database's cost records and tasks): for each
    window key given, its entries recorded at or after the time given (epoch seconds). A key
    it keeps no record of is left out of the answer: its window starts empty."""

    async def __call__(self, since: Mapping[str, float]) -> Mapping[str, Sequence[PastEntry]]: ...


class LimitStoreUnavailable(OmniForgeError):
    """The limit store can decide nothing now: its windows are unreachable and so is the
    durable record they would be filled from. An admission answers it with 503 (retry after
    `retry_after_s`); a call inside a run goes ahead uncounted rather than fail its run."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LimitStore(Protocol):
    """Sliding windows with reservations. A caller acquires several windows at once (all or
    nothing), later settles each to the real amount or releases them all. A window the store
    does not hold yet (never used by it, or lost: a restarted Redis) is filled from its
    durable record before it admits anything."""

    async def acquire(
        self, requests: Sequence[LimitRequest], *, grant_id: str | None = None
    ) -> Grant | Refusal:
        """Records every request, or none when any window would go over its limit. The grant
        takes `grant_id` when given (the id the durable record will know the call by); an
        acquisition of an id the windows hold already is granted as it stands."""
        ...

    async def settle(self, grant: Grant, amounts: Mapping[str, int]) -> None:
        """Sets the grant's entries of the keys named to their real amounts, keeping their
        time. An entry its window lost while the call ran (a restarted store) is put back, at
        the grant's time, with its real amount (or its reserved one, for keys not named);
        entries that left their window are ignored. Idempotent. Not for a released grant."""
        ...

    async def release(self, grant: Grant) -> None:
        """Removes every entry of the grant (a call that did not happen). Idempotent."""
        ...

    async def usage(self, key: str, window_s: float) -> int:
        """What the window holds now."""
        ...

    async def aclose(self) -> None: ...


def retry_after(
    entries: Iterable[tuple[float, int]], request: LimitRequest, used: int, now: float
) -> float | None:
    """How long until enough of a window's `entries` (time, amount; oldest first) leave it
    for `request` to fit beside `used`; None when it never fits."""
    if request.amount > request.limit:
        return None
    needed = used + request.amount - request.limit
    freed = 0
    for at, amount in entries:
        freed += amount
        if freed >= needed:
            return max(at + request.window_s - now, 0.0)
    return None
