"""Who hears of a run's events: its tenant's enabled endpoints (read once per run start from a
short per-tenant cache, so tenants without webhooks cost a dictionary look-up) and its task's
own `webhook_url`; and the outbox rows a run's events make, built as its recorder numbers
them so they are stored in the same transaction as the change they announce."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

from sqlalchemy import select

from app.caches import TtlCache
from app.chain import (
    ApprovalRequiredEvent,
    BudgetWarningEvent,
    ChainCompletedEvent,
    ChainEvent,
    ChainFailedEvent,
    DoneEvent,
    ReasoningChain,
    TaskState,
    TaskStatusEvent,
)
from app.storage.database import Database
from app.storage.tables import webhook_endpoints
from app.storage.webhook_outbox import (
    BUDGET_WARNING,
    EVENT_OF_STATE,
    delivery_rows,
    usage_of,
)

# Tenants whose subscriptions are cached at most.
MAX_CACHED_TENANTS = 10_000


@dataclass(frozen=True, slots=True)
class Subscriptions:
    """A tenant's enabled endpoints, each with the event types it receives."""

    endpoints: tuple[tuple[UUID, frozenset[str]], ...] = ()

    def of(self, event: str) -> list[UUID]:
        return [endpoint for endpoint, events in self.endpoints if event in events]


NONE = Subscriptions()


class WebhookSubscriptions:
    """Every tenant's subscriptions, cached for `ttl_s`; a change made through this process
    (`changed`) applies to runs starting from then, one made elsewhere within `ttl_s`."""

    def __init__(
        self,
        database: Database,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._cache = TtlCache[str, Subscriptions](
            ttl_s=ttl_s, max_entries=MAX_CACHED_TENANTS, clock=clock
        )

    async def of(self, tenant_id: str) -> Subscriptions:
        return await self._cache.get_or_load(tenant_id, partial(self._read, tenant_id))

    def changed(self, tenant_id: str) -> None:
        self._cache.invalidate(tenant_id)

    async def _read(self, tenant_id: str) -> Subscriptions:
        e = webhook_endpoints.c
        statement = select(e.id, e.events).where(e.tenant_id == tenant_id, e.enabled.is_(True))
        async with self._database.read() as connection:
            rows = (await connection.execute(statement)).all()
        return Subscriptions(tuple((row.id, frozenset(row.events)) for row in rows))


class RunWebhooks:
    """One run's deliveries: `rows(event)` gives the outbox rows an event of the run makes
    (its end, its wait for a human, its budget warning), or none."""

    def __init__(
        self,
        tenant_id: str,
        task_id: UUID,
        chain: ReasoningChain,
        hooks: Subscriptions,
        url: str | None,
    ) -> None:
        self._tenant_id = tenant_id
        self._task_id = task_id
        self._chain = chain
        self._hooks = hooks
        self._url = url
        self._answer: str | None = None
        self._error: dict[str, Any] | None = None
        self._waiting_on: list[dict[str, Any]] = []

    @classmethod
    def of(
        cls,
        tenant_id: str,
        task_id: UUID,
        chain: ReasoningChain,
        hooks: Subscriptions,
        url: str | None,
    ) -> "RunWebhooks | None":
        """None when nobody listens: the run then builds nothing."""
        if not hooks.endpoints and url is None:
            return None
        return cls(tenant_id, task_id, chain, hooks, url)

    def rows(self, event: ChainEvent) -> list[dict[str, Any]]:
        if isinstance(event, ChainCompletedEvent):
            self._answer = event.answer
        elif isinstance(event, ChainFailedEvent):
            self._error = {"code": str(event.error_code), "message": event.error_message}
        elif isinstance(event, ApprovalRequiredEvent):
            self._waiting_on.append(
                {"approval_id": str(event.approval_id), "tool_name": event.tool_name}
            )
        elif isinstance(event, BudgetWarningEvent):
            data = self._data("working")
            data["limits"] = [str(limit) for limit in event.limits]
            data["usage"] = usage_of(event.metrics)
            return self._rows(BUDGET_WARNING, data, event.timestamp, url=False)
        elif isinstance(event, TaskStatusEvent) and event.state is TaskState.INPUT_REQUIRED:
            data = self._data(event.state)
            data["approvals"], self._waiting_on = self._waiting_on, []
            return self._rows(EVENT_OF_STATE[event.state], data, event.timestamp)
        elif isinstance(event, DoneEvent) and event.final_state in EVENT_OF_STATE:
            return self._rows(EVENT_OF_STATE[event.final_state], self._end(event), event.timestamp)
        return []

    def _end(self, event: DoneEvent) -> dict[str, Any]:
        chain = self._chain
        data = self._data(event.final_state)
        if event.final_state in (TaskState.COMPLETED, TaskState.INCOMPLETE):
            # `final_answer`: its old name, kept for one release.
            data["answer"] = data["final_answer"] = self._answer
        if self._error is not None:
            data["error"] = self._error
        data["usage"] = usage_of(chain.metrics)
        return data

    def _data(self, status: str) -> dict[str, Any]:
        return {
            "task_id": str(self._task_id),
            "chain_id": str(self._chain.id),
            "status": str(status),
        }

    def _rows(
        self, event: str, data: dict[str, Any], at: Any, *, url: bool = True
    ) -> list[dict[str, Any]]:
        return delivery_rows(
            self._tenant_id,
            self._task_id,
            event,
            data,
            endpoints=self._hooks.of(event),
            url=self._url if url else None,
            at=at,
        )
