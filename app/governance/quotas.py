"""Tenant quotas: how fast a tenant may submit, call models and tools, and spend.

Every limit is a sliding window of the shared `LimitStore` (in-process, or Redis when several
instances serve one deployment), whose truth is the durable record (`window_history`). Token
and cost windows reserve a call's estimate before it runs and settle to its real usage after,
atomically, so concurrent runs of a tenant cannot together cross a window by more than what
estimates under-count; a refused, failed or cancelled call gives its reservation back. A call's
entries carry its correlation id, the id its cost record keeps, so a window filled again from
the record never counts a call twice.
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from app.chain import ErrorCode, ToolResultInfo, ToolType, format_usd
from app.chain.budget import Budget
from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.governance.limits import (
    Grant,
    LimitRequest,
    LimitStore,
    LimitStoreUnavailable,
    Refusal,
    cost_units,
    usd_of_units,
)
from app.tools.errors import GuardRejection

if TYPE_CHECKING:
    # Only named: importing the guard protocol at run time would import the tool layer (and
    # LiteLLM with it) into every process that reads a tenant, the CLI's light commands too.
    from app.tools.guards import PendingCall

logger = logging.getLogger(__name__)

MINUTE, HOUR, DAY = 60.0, 3_600.0, 86_400.0
SUBMISSIONS = "submissions"
"""The window of a scope's submissions is `"{scope}:submissions"`."""

Counts = Literal["calls", "tokens", "cost"]
LLM_WINDOWS: dict[str, tuple[Counts, float]] = {
    "llm_calls_per_minute": ("calls", MINUTE),
    "tokens_per_minute": ("tokens", MINUTE),
    "tokens_per_hour": ("tokens", HOUR),
    "cost_per_hour_usd": ("cost", HOUR),
    "cost_per_day_usd": ("cost", DAY),
}
"""The windows LLM calls count against (`"{scope}:{name}"`): what each counts (cost in cost
units), and its length."""
_WAIT_MARGIN_S = 0.001

PositiveInt = Annotated[int, Field(gt=0)]
PositiveUSD = Annotated[Decimal, Field(gt=0, max_digits=24, decimal_places=12)]


class TenantQuotas(BaseModel):
    """A tenant's limits; unset ones do not limit. Windows slide: a per-minute limit holds
    for every 60 seconds, not per calendar minute."""

    model_config = ConfigDict(extra="forbid")

    submissions_per_minute: PositiveInt | None = Field(
        default=None, description="Tasks accepted per minute; more are refused with 429."
    )
    concurrent_runs: PositiveInt | None = Field(
        default=None, description="Unfinished tasks at once; more are refused with 429."
    )
    llm_calls_per_minute: PositiveInt | None = None
    tool_calls_per_minute: dict[ToolType, PositiveInt] = Field(
        default_factory=dict,
        description="Calls per minute of the other tools, by tool type (`llm` is "
        "`llm_calls_per_minute`).",
    )
    tokens_per_minute: PositiveInt | None = None
    tokens_per_hour: PositiveInt | None = None
    cost_per_hour_usd: PositiveUSD | None = None
    cost_per_day_usd: PositiveUSD | None = None
    max_wait_s: float = Field(
        default=30.0,
        ge=0,
        le=600,
        description="How long a call over a limit inside a run waits for the window to free "
        "up before the run ends `rate_limited`.",
    )
    default_budget: Budget = Field(
        default_factory=Budget,
        description="Budget limits of tasks that do not set them themselves.",
    )

    @property
    def limits_runs(self) -> bool:
        """Whether any limit applies to calls inside runs."""
        return bool(
            self.llm_calls_per_minute
            or self.tool_calls_per_minute
            or self.tokens_per_minute
            or self.tokens_per_hour
            or self.cost_per_hour_usd
            or self.cost_per_day_usd
        )


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """Why a limit refused: which, its value and window, and when enough of it frees up."""

    limit: str
    limit_value: int | str
    window_s: float | None  # None: not a window (concurrent runs)
    retry_after_s: float | None

    @classmethod
    def of(cls, refusal: Refusal) -> "QuotaRefusal":
        request = refusal.request
        value: int | str = request.limit
        if request.name.startswith("cost_"):
            value = format_usd(usd_of_units(request.limit))
        return cls(request.name, value, request.window_s, refusal.retry_after_s)

    def details(self) -> dict[str, Any]:
        resets = None
        if self.retry_after_s is not None:
            resets = (utc_now() + timedelta(seconds=self.retry_after_s)).isoformat()
        return {
            "limit": self.limit,
            "limit_value": self.limit_value,
            "window_s": self.window_s,
            "retry_after_s": None if self.retry_after_s is None else round(self.retry_after_s, 3),
            "resets_at": resets,
        }

    def describe(self) -> str:
        when = (
            "this call alone exceeds it"
            if self.retry_after_s is None
            else f"it frees up in {self.retry_after_s:.1f} s"
        )
        return f"tenant limit {self.limit} ({self.limit_value}) reached; {when}"


class RateLimited(OmniForgeError):
    """A submission over one of its tenant's limits (HTTP 429)."""

    def __init__(self, refusal: QuotaRefusal, message: str | None = None) -> None:
        super().__init__(message or refusal.describe())
        self.refusal = refusal


def submission_request(tenant_id: str, quotas: TenantQuotas) -> LimitRequest | None:
    if quotas.submissions_per_minute is None:
        return None
    return LimitRequest(
        key=f"{tenant_id}:{SUBMISSIONS}",
        amount=1,
        limit=quotas.submissions_per_minute,
        window_s=MINUTE,
        name="submissions_per_minute",
    )


async def admit_submission(store: LimitStore, tenant_id: str, quotas: TenantQuotas) -> Grant | None:
    """Counts a submission against its tenant's rate, or raises `RateLimited`."""
    request = submission_request(tenant_id, quotas)
    if request is None:
        return None
    outcome = await store.acquire([request])
    if isinstance(outcome, Refusal):
        raise RateLimited(QuotaRefusal.of(outcome))
    return outcome


class QuotaGuard:
    """A run's calls against its tenant's windows. A call over a limit waits (up to the
    tenant's `max_wait_s`) until the window frees enough, else the run ends `rate_limited`
    naming the limit and when it resets."""

    def __init__(
        self,
        store: LimitStore,
        tenant_id: str,
        quotas: TenantQuotas,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._store = store
        self._tenant = tenant_id
        self._quotas = quotas
        self._clock = clock
        self._sleep = sleep
        self._grants: dict[UUID, Grant] = {}
        self._releases: set[asyncio.Task[None]] = set()

    async def before_call(self, call: "PendingCall") -> None:
        """Reserves the call in its tenant's windows, waiting while they are full. With the
        windows undecidable (their store and the durable record both unreachable) the call
        goes ahead uncounted: a running task is never failed for it."""
        requests = await self._requests(call)
        if not requests:
            return
        deadline = self._clock() + self._quotas.max_wait_s
        grant_id = str(call.context.correlation_id)  # as the call's cost record will know it
        while True:
            try:
                outcome = await self._store.acquire(requests, grant_id=grant_id)
            except LimitStoreUnavailable as exc:
                logger.warning("tenant %s's call goes ahead uncounted: %s", self._tenant, exc)
                return
            if isinstance(outcome, Grant):
                self._grants[call.call_step.id] = outcome
                return
            refusal = QuotaRefusal.of(outcome)
            wait = refusal.retry_after_s
            if wait is None or self._clock() + wait > deadline:
                raise GuardRejection(
                    ErrorCode.RATE_LIMITED, refusal.describe(), details=refusal.details()
                )
            # A millisecond more: the window must have moved past the entry, float rounding
            # of the times notwithstanding.
            await self._sleep(wait + _WAIT_MARGIN_S)

    async def after_call(self, call: "PendingCall", result: ToolResultInfo) -> None:
        grant = self._grants.pop(call.call_step.id, None)
        if grant is None:
            return
        tokens = result.total_tokens or 0
        cost = cost_units(result.cost_usd) if result.cost_usd is not None else 0
        amounts = {
            request.key: cost if request.name.startswith("cost_") else tokens
            for request in grant.requests
            if request.name.startswith(("tokens_", "cost_"))
        }
        if amounts:
            await self._store.settle(grant, amounts)

    def abandon(self, call: "PendingCall") -> None:
        grant = self._grants.pop(call.call_step.id, None)
        if grant is not None:
            task = asyncio.get_running_loop().create_task(self._store.release(grant))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def _requests(self, call: "PendingCall") -> list[LimitRequest]:
        quotas, tenant = self._quotas, self._tenant
        tool_type = call.definition.type
        if tool_type is not ToolType.LLM:
            limit = quotas.tool_calls_per_minute.get(tool_type)
            if limit is None:
                return []
            name = f"tool_calls_per_minute.{tool_type}"
            return [LimitRequest(f"{tenant}:{name}", 1, limit, MINUTE, name)]
        windows = llm_windows(quotas)
        if any(window.counts != "calls" for window in windows):
            estimate = await call.estimate()
        else:
            estimate = None
        requests: list[LimitRequest] = []
        for window in windows:
            if window.counts == "calls":
                amount = 1
            elif estimate is None:
                continue
            elif window.counts == "tokens":
                amount = estimate.input_tokens + estimate.max_output_tokens
            elif estimate.cost_usd is None:
                # An unpriced model's cost is unknown: it cannot be reserved (its calls
                # record `unpriced`, and reports count them).
                continue
            else:
                amount = max(cost_units(estimate.cost_usd), 1)
            requests.append(
                LimitRequest(
                    f"{tenant}:{window.name}", amount, window.limit, window.window_s, window.name
                )
            )
        return requests


@dataclass(frozen=True, slots=True)
class LLMWindow:
    """A tenant window LLM calls count against: calls, tokens or cost (in cost units)."""

    name: str
    limit: int
    window_s: float
    counts: Counts


def llm_windows(quotas: TenantQuotas) -> list[LLMWindow]:
    cost_per_hour, cost_per_day = quotas.cost_per_hour_usd, quotas.cost_per_day_usd
    limits = {
        "llm_calls_per_minute": quotas.llm_calls_per_minute,
        "tokens_per_minute": quotas.tokens_per_minute,
        "tokens_per_hour": quotas.tokens_per_hour,
        "cost_per_hour_usd": cost_units(cost_per_hour) if cost_per_hour else None,
        "cost_per_day_usd": cost_units(cost_per_day) if cost_per_day else None,
    }
    return [
        LLMWindow(name, limit, LLM_WINDOWS[name][1], LLM_WINDOWS[name][0])
        for name, limit in limits.items()
        if limit
    ]


def retry_after_header(seconds: float | None) -> str | None:
    """`Retry-After` in whole seconds, rounded up (a client retrying then will fit)."""
    return None if seconds is None else str(max(math.ceil(seconds), 1))
