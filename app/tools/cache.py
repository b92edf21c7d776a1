"""Results of tools that declare `cache_ttl_seconds`, kept for that long: an identical call
(same tenant, tool, version and arguments) within it is answered from here, costs nothing and
is recorded `cached: true` (and audited like any call)."""

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pydantic_core import to_jsonable_python

from app.tools.models import ToolDefinition

DEFAULT_MAX_ENTRIES = 10_000


def cache_key(tenant_id: str | None, definition: ToolDefinition, arguments: dict[str, Any]) -> str:
    """One key per tenant, tool, tool version and arguments (canonical JSON: key order does
    not matter)."""
    canonical = json.dumps(
        to_jsonable_python(arguments, fallback=str),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{tenant_id or ''}\x00{definition.name}\x00{definition.version}\x00{digest}"


class ToolResultCache:
    """An in-process LRU with a deadline per entry. Each instance keeps its own: a cached
    result saves a call, it is never needed for correctness."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._max_entries = max_entries
        self._clock = clock

    def get(self, key: str) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        deadline, value = entry
        if deadline <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: str, value: Any, ttl_s: float) -> None:
        self._entries[key] = (self._clock() + ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
