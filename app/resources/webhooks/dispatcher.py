"""Sends the webhook outbox: due deliveries claimed (one instance at a time each), signed,
POSTed through the SSRF guard (checked again at every attempt: DNS can change; no redirect
followed), every attempt stored with how it went, and failures retried with capped
exponential backoff and jitter until their retry window closes.

Nothing polls: the dispatcher wakes when a delivery is stored (a notice), when one of its
sends ends, and otherwise only at the next due time the store holds."""

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx

from app.chain.models import utc_now
from app.errors import OmniForgeError
from app.resources.webhooks.signing import (
    WebhookKeys,
    endpoint_secret_name,
    signed_headers,
)
from app.security.secrets import Sealed, SecretUnreadable
from app.storage.database import Database
from app.storage.notify import WEBHOOKS, Notices
from app.storage.tenants import network_allow
from app.storage.text import storable
from app.storage.webhook_outbox import (
    DELIVERED,
    FAILED,
    PENDING,
    Claimed,
    claim,
    endpoint_target,
    next_due,
    record_attempt,
)
from app.tools.errors import ToolError
from app.tools.net import SsrfGuard, WebClient
from app.tools.services import NetworkPolicy

logger = logging.getLogger(__name__)

RESPONSE_SNIPPET_BYTES = 1024
USER_AGENT = "OmniForge-Webhooks/1.0"
# A claim outlives the attempt's timeout by this much: an instance that died mid-send leaves
# its delivery due again soon after.
CLAIM_MARGIN_S = 1.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits between attempts: `initial_s` doubled per failure, at most `max_s`, ±20 %."""

    initial_s: float
    max_s: float

    def after(self, failures: int) -> timedelta:
        base = min(self.max_s, self.initial_s * 2 ** max(0, failures - 1))
        return timedelta(seconds=base * random.uniform(0.8, 1.2))


@dataclass(frozen=True, slots=True)
class _Target:
    url: str
    secret: str


class _Undeliverable(OmniForgeError):
    """A delivery with nowhere to go (its endpoint gone, its secret unreadable)."""


class WebhookDispatcher:
    """This process's sender of webhook deliveries, `concurrency` at a time."""

    def __init__(
        self,
        database: Database,
        notices: Notices,
        keys: WebhookKeys,
        *,
        network: NetworkPolicy,
        timeout_s: float,
        backoff: Backoff,
        retry_for: timedelta,
        concurrency: int,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._database = database
        self._notices = notices
        self._keys = keys
        self._network = network
        self._timeout_s = timeout_s
        self._backoff = backoff
        self._retry_for = retry_for
        self._concurrency = concurrency
        self._clock = clock
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._ssl_context: ssl.SSLContext | None = None

    def wake(self, _payload: str = "") -> None:
        """Something may be due now: a delivery was stored or made due again."""
        self._wake.set()

    async def start(self) -> None:
        self._notices.listen(WEBHOOKS, self.wake)
        # Notices may have been missed while the connection to Postgres was down.
        self._notices.on_reconnect.append(self.wake)
        self._loop_task = asyncio.create_task(self._run(), name="webhook-dispatcher")

    async def aclose(self) -> None:
        """Stops sending; deliveries under way are left to their claims' end (another
        instance, or this one restarted, sends them again)."""
        tasks = [t for t in [self._loop_task, *self._sends] if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def settled(self) -> None:
        """Until the sends under way have ended (for tests and shutdown)."""
        while self._sends:
            await asyncio.wait(set(self._sends))

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait_s = await self._dispatch()
            except Exception:
                logger.exception("webhook dispatch failed; trying again shortly")
                wait_s = self._backoff.initial_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)

    async def _dispatch(self) -> float | None:
        """Starts the sends that are due and there is room for; returns how long to sleep
        until the next is due (None: until woken)."""
        room = self._concurrency - len(self._sends)
        now = self._clock()
        hold = timedelta(seconds=self._timeout_s + CLAIM_MARGIN_S)
        if room > 0:
            async with self._database.transaction() as connection:
                claimed = await claim(connection, now=now, hold=hold, limit=room)
            for delivery in claimed:
                task = asyncio.create_task(self._send(delivery), name=f"webhook-{delivery.id}")
                self._sends.add(task)
                task.add_done_callback(self._sent)
            if len(claimed) == room:
                return None  # full: a send ending wakes the loop
        elif self._sends:
            return None
        async with self._database.read() as connection:
            due = await next_due(connection)
        if due is None:
            return None
        return max(0.0, (due - self._clock()).total_seconds())

    def _sent(self, task: "asyncio.Task[None]") -> None:
        self._sends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a webhook send failed", exc_info=task.exception())
        self._wake.set()

    async def _send(self, delivery: Claimed) -> None:
        started_at = self._clock()
        started = time.monotonic()
        status_code: int | None = None
        response: str | None = None
        error: str | None = None
        url = delivery.url or ""
        try:
            target = await self._target(delivery)
            url = target.url
            status_code, response = await self._post(delivery, target, started_at)
            if not 200 <= status_code < 300:
                error = f"the receiver answered HTTP {status_code}"
        except _Undeliverable as exc:
            error = str(exc)
            await self._finish(delivery, started_at, started, url, None, error, None, final=True)
            return
        except ToolError as exc:
            error = exc.message
        except TimeoutError:
            error = f"no answer within {self._timeout_s:g} s"
        await self._finish(delivery, started_at, started, url, status_code, error, response)

    async def _finish(
        self,
        delivery: Claimed,
        started_at: datetime,
        started: float,
        url: str,
        status_code: int | None,
        error: str | None,
        response: str | None,
        *,
        final: bool = False,
    ) -> None:
        ended = self._clock()
        attempt = {
            "url": url,
            "started_at": started_at,
            "duration_ms": round((time.monotonic() - started) * 1000),
            "status_code": status_code,
            "error": None if error is None else storable(self._keys.mask(error)),
            "response": None if response is None else storable(self._keys.mask(response)),
        }
        if error is None:
            status, next_at = DELIVERED, None
        else:
            retry_at = ended + self._backoff.after(delivery.attempt)
            give_up_at = delivery.give_up_at or delivery.created_at + self._retry_for
            gives_up = final or retry_at > give_up_at
            status, next_at = (FAILED, None) if gives_up else (PENDING, retry_at)
            logger.info(
                "webhook delivery %s attempt %d failed (%s)%s",
                delivery.id,
                delivery.attempt,
                error,
                "; giving up" if gives_up else "",
            )
        async with self._database.transaction() as connection:
            await record_attempt(
                connection, delivery, attempt, status=status, next_attempt_at=next_at
            )

    async def _target(self, delivery: Claimed) -> _Target:
        if delivery.endpoint_id is None:
            assert delivery.url is not None
            secret, _ = await self._keys.task_secret(delivery.tenant_id)
            return _Target(delivery.url, secret)
        async with self._database.read() as connection:
            found = await endpoint_target(connection, delivery.tenant_id, delivery.endpoint_id)
        if found is None:
            raise _Undeliverable("its endpoint was deleted")
        url, key_id, sealed = found
        name = endpoint_secret_name(delivery.endpoint_id)
        try:
            secret = self._keys.open(delivery.tenant_id, name, Sealed(key_id, sealed))
        except SecretUnreadable as exc:
            raise _Undeliverable(str(exc)) from None
        return _Target(url, secret)

    async def _post(
        self, delivery: Claimed, target: _Target, at: datetime
    ) -> tuple[int, str | None]:
        if self._ssl_context is None:  # loading the CA bundle takes ~18 ms: once, off the loop
            self._ssl_context = await asyncio.to_thread(httpx.create_ssl_context, trust_env=False)
        async with self._database.read() as connection:
            allowed = await network_allow(connection, delivery.tenant_id)
        network = self._network.merged(NetworkPolicy.of(allowed)) if allowed else self._network
        headers = signed_headers(target.secret, str(delivery.id), at, delivery.payload)
        headers["content-type"] = "application/json"
        client = WebClient(
            SsrfGuard(network),
            self._ssl_context,
            tool="webhook",
            max_bytes=RESPONSE_SNIPPET_BYTES,
            timeout_s=self._timeout_s,
            user_agent=USER_AGENT,
            max_redirects=0,
        )
        async with asyncio.timeout(self._timeout_s), client:
            fetched = await client.request(
                "POST", target.url, headers=headers, content=delivery.payload.encode()
            )
        snippet = fetched.body.decode("utf-8", errors="replace") or None
        return fetched.status, snippet
