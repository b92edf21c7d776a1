"""A webhook receiver for tests: a real HTTP server (aiohttp) on 127.0.0.1 that records every
delivery it gets, verifies its signature with the `standardwebhooks` library (nobody here
wrote it) when given the secret, and answers as scripted: a status per request in order (then
200), or holding a request until the test lets it go (`hold`)."""

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass(frozen=True)
class Received:
    """One request as it came: its headers (lower-case names), body, and whether its
    signature verified (None: no secret was known to check it)."""

    headers: dict[str, str]
    body: str
    verified: bool | None

    @property
    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.body)
        return document

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class WebhookReceiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.secrets: dict[str, str] = {}  # path -> secret
        self._statuses: deque[int] = deque()
        self._hold: asyncio.Event | None = None
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, *statuses: int) -> None:
        """The statuses of the next requests, in order (200 after them)."""
        self._statuses.extend(statuses)

    def hold(self) -> asyncio.Event:
        """Requests from now on wait, unanswered, until the event returned is set."""
        self._hold = asyncio.Event()
        return self._hold

    async def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Received]:
        """Until `count` requests have come in all; woken by each one (no polling)."""
        async with asyncio.timeout(timeout_s):
            while len(self.received) < count:
                self._changed.clear()
                await self._changed.wait()
        return list(self.received)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        headers = {name.lower(): value for name, value in request.headers.items()}
        secret = self.secrets.get(request.path)
        verified: bool | None = None
        if secret is not None:
            try:
                Webhook(secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        self.received.append(Received(headers, body, verified))
        self._changed.set()
        if self._hold is not None:
            await self._hold.wait()
        status = self._statuses.popleft() if self._statuses else 200
        return web.Response(status=status, text=f"answered {status}")

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._hold is not None:
            self._hold.set()
        assert self._runner is not None
        await self._runner.cleanup()
