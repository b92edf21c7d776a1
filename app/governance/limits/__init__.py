"""The limit store: sliding windows of amounts (calls, tokens, cost) with reservations.

A caller acquires several windows at once (all or nothing), later settles each to the real
amount or releases them all. Windows slide: what counts is the sum of the entries younger than
the window, each entry keeping the time it was acquired. The truth of every window is the
durable record (the database's cost records and tasks, see `History`); a store holds a cache of
it: this process's (one instance), or Redis's (every instance shares the windows, each
operation one Lua script), which keeps deciding on the record while Redis is unreachable.
"""

from typing import TYPE_CHECKING

from app.governance.limits.memory import InProcessLimitStore
from app.governance.limits.recorded import RecordedWindows
from app.governance.limits.windows import (
    COST_UNIT,
    Grant,
    History,
    LimitRequest,
    LimitStore,
    LimitStoreUnavailable,
    OwnEntry,
    PastEntry,
    Refusal,
    cost_units,
    usd_of_units,
)
from app.lazy import lazy_attributes

if TYPE_CHECKING:
    from app.governance.limits.redis_store import RedisLimitStore
    from app.governance.limits.resilient import ResilientLimitStore

# The Redis stores import the Redis client (a fifth of a second): only a deployment with Redis,
# or code naming them, imports them.
__getattr__ = lazy_attributes(
    __name__,
    {
        "RedisLimitStore": "app.governance.limits.redis_store",
        "ResilientLimitStore": "app.governance.limits.resilient",
    },
)

__all__ = [
    "COST_UNIT",
    "Grant",
    "History",
    "InProcessLimitStore",
    "LimitRequest",
    "LimitStore",
    "LimitStoreUnavailable",
    "OwnEntry",
    "PastEntry",
    "RecordedWindows",
    "RedisLimitStore",
    "Refusal",
    "ResilientLimitStore",
    "cost_units",
    "make_limit_store",
    "usd_of_units",
]


def make_limit_store(redis_url: str | None, *, history: History | None = None) -> LimitStore:
    """Redis when a URL is given (every instance shares the windows; while Redis is
    unreachable, each decides on the durable record), else this process's windows. Either
    fills a window it does not hold from `history` before it admits anything."""
    if redis_url:
        from app.governance.limits.redis_store import RedisLimitStore
        from app.governance.limits.resilient import ResilientLimitStore

        return ResilientLimitStore(
            RedisLimitStore(redis_url, history=history),
            RecordedWindows(history),
            history=history,
        )
    return InProcessLimitStore(history=history)
