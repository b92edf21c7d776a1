"""The durable record of the tenants' limit windows, read from the database: what a window held
before its store lost it (a restart of this process, or of Redis), or while Redis was away.

A window is `"{scope}:{name}"`, its scope a tenant or one of its API keys (`KeyGrant.scope`).
Entries carry the id their grants had, so a store holding a grant already counts it once.
- LLM windows (`quotas.LLM_WINDOWS`): the scope's model calls' cost records, by correlation id,
  counting 1, their tokens or their cost. A tenant's windows of an hour or more also count the
  daily sums of calls of tasks deleted since (retention, erasure), each sum at the latest time
  its calls can have been made (conservative: it may count for longer than they would have).
  Calls of a key's tasks deleted since, and failed calls that used nothing (no cost record),
  are not in the record.
- Submissions: the scope's tasks (not sub-agents' tasks), by their creation; one admitted but
  not stored yet when its window was lost is not in the record.
- Tool calls per minute: no record (tool calls are not kept by tenant, type and time): such a
  window starts empty after a loss, so within that minute up to twice its limit may pass.
"""

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, time, timedelta
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.governance.limits import LimitStoreUnavailable, PastEntry, cost_units
from app.governance.quotas import HOUR, LLM_WINDOWS, SUBMISSIONS, Counts
from app.storage.database import Database
from app.storage.errors import is_transient
from app.storage.usage_history import PurgedCalls, RecordedCall, UsageHistory

_API_KEY_SCOPE = "/api-key/"  # a key's scope is "{tenant}/api-key/{key id}"


class WindowHistory:
    """The `History` of the limit stores, read from `database`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def __call__(self, since: Mapping[str, float]) -> dict[str, list[PastEntry]]:
        scopes: dict[str, dict[str, float]] = {}
        for key, at in since.items():
            scope, _, name = key.rpartition(":")
            if scope and (name in LLM_WINDOWS or name == SUBMISSIONS):
                scopes.setdefault(scope, {})[name] = at
        if not scopes:
            return {}
        entries: dict[str, list[PastEntry]] = {}
        try:
            async with self._database.read() as connection:
                for scope, names in scopes.items():
                    entries.update(await _of_scope(connection, scope, names))
        except Exception as exc:
            if not is_transient(exc):
                raise
            raise LimitStoreUnavailable("the database is unavailable") from exc
        return entries


async def _of_scope(
    connection: AsyncConnection, scope: str, names: Mapping[str, float]
) -> dict[str, list[PastEntry]]:
    tenant_id, _, key = scope.partition(_API_KEY_SCOPE)
    api_key_id = UUID(key) if key else None
    history = UsageHistory(connection, tenant_id)
    entries: dict[str, list[PastEntry]] = {}
    llm = {name: at for name, at in names.items() if name in LLM_WINDOWS}
    if llm:
        start = datetime.fromtimestamp(min(llm.values()), UTC)
        calls = await history.model_calls(start, api_key_id=api_key_id)
        long = any(LLM_WINDOWS[name][1] >= HOUR for name in llm)
        purged = await history.purged_model_calls(start) if long and not api_key_id else []
        for name, at in llm.items():
            counts, window_s = LLM_WINDOWS[name]
            mine = _by_id(
                (
                    PastEntry(str(c.correlation_id), c.recorded_at.timestamp(), _of_call(counts, c))
                    for c in calls
                    if c.recorded_at.timestamp() >= at
                ),
                add=counts != "calls",
            )
            if window_s >= HOUR:
                for sums in purged:
                    latest = _latest(sums)
                    if latest >= at:
                        purge = f"purged:{sums.day}:{sums.purged_at.timestamp()}"
                        mine.append(PastEntry(purge, latest, _of_sums(counts, sums)))
            entries[f"{scope}:{name}"] = mine
    if SUBMISSIONS in names:
        start = datetime.fromtimestamp(names[SUBMISSIONS], UTC)
        entries[f"{scope}:{SUBMISSIONS}"] = [
            PastEntry(str(s.task_id), s.created_at.timestamp(), 1)
            for s in await history.submissions(start, api_key_id=api_key_id)
        ]
    return entries


def _of_call(counts: Counts, call: RecordedCall) -> int:
    if counts == "calls":
        return 1
    if counts == "tokens":
        return call.input_tokens + call.output_tokens
    return 0 if call.cost_usd is None else cost_units(call.cost_usd)


def _of_sums(counts: Counts, sums: PurgedCalls) -> int:
    if counts == "calls":
        return sums.calls
    if counts == "tokens":
        return sums.input_tokens + sums.output_tokens
    return cost_units(sums.cost_usd)


def _latest(sums: PurgedCalls) -> float:
    """The latest time the summed calls can have been made: before their day ended, and
    before their tasks were deleted."""
    day_end = datetime.combine(sums.day + timedelta(days=1), time(0), UTC)
    return min(day_end, sums.purged_at).timestamp()


def _by_id(entries: Iterable[PastEntry], *, add: bool) -> list[PastEntry]:
    """One entry per id: a call with several cost records counts once, with the usage of
    all of them (`add`)."""
    merged: dict[str, PastEntry] = {}
    for entry in entries:
        seen = merged.get(entry.id)
        if seen is None:
            merged[entry.id] = entry
        else:
            amount = seen.amount + entry.amount if add else seen.amount
            merged[entry.id] = PastEntry(entry.id, max(seen.at, entry.at), amount)
    return list(merged.values())
