"""A tenant's requests that end in a client error (4xx) are counted in a window of the
tenant's limit store; past `client_errors_per_minute` its requests are refused (429
`rate-limited`, limit `client_errors_per_minute`) until the window frees up. A tenant
flooding invalid requests then costs the service a lookup per request, and other tenants
nothing."""

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import TENANT_KEY
from app.api.errors import error_response
from app.api.state import AppState
from app.governance.limits import LimitRequest, LimitStoreUnavailable, Refusal
from app.governance.quotas import MINUTE, QuotaRefusal, RateLimited
from app.governance.tenants import Tenant

LIMIT_NAME = "client_errors_per_minute"
_WINDOW = "client_errors"


class ClientErrorLimit:
    """Inside authentication (it needs the caller's tenant): counts each 4xx answer but its
    own 429s, and refuses a tenant whose window is full. Which tenants are refused, and until
    when, is kept here: asking the store happens only when a request fails."""

    def __init__(self, app: ASGIApp, *, per_minute: int | None) -> None:
        self.app = app
        self.per_minute = per_minute
        self._refused_until: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tenant = scope.get("state", {}).get(TENANT_KEY) if scope["type"] == "http" else None
        if self.per_minute is None or not isinstance(tenant, Tenant):
            await self.app(scope, receive, send)
            return
        tenant_id = tenant.id
        now = time.monotonic()
        until = self._refused_until.get(tenant_id)
        if until is not None:
            if until > now:
                await error_response(self._refused(until - now))(scope, receive, send)
                return
            del self._refused_until[tenant_id]
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, sending)
        if 400 <= status < 500 and status != 429:
            await self._count(scope["app"].state.omniforge, tenant_id)

    async def _count(self, state: AppState, tenant_id: str) -> None:
        assert self.per_minute is not None
        request = LimitRequest(
            key=f"{tenant_id}:{_WINDOW}",
            amount=1,
            limit=self.per_minute,
            window_s=MINUTE,
            name=LIMIT_NAME,
        )
        try:
            outcome = await state.runs.limits.acquire([request])
        except LimitStoreUnavailable:
            return  # uncounted: an outage of the store refuses nobody
        if isinstance(outcome, Refusal):
            wait = outcome.retry_after_s if outcome.retry_after_s is not None else MINUTE
            self._refused_until[tenant_id] = time.monotonic() + wait
            self._forget_expired()

    def _refused(self, retry_after_s: float) -> RateLimited:
        assert self.per_minute is not None
        refusal = QuotaRefusal(LIMIT_NAME, self.per_minute, MINUTE, retry_after_s)
        return RateLimited(
            refusal,
            f"more than {self.per_minute} of this tenant's requests a minute were invalid "
            f"(4xx); its requests are refused for {retry_after_s:.0f} s",
        )

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for tenant_id in [t for t, until in self._refused_until.items() if until <= now]:
            del self._refused_until[tenant_id]
