"""The server of the API: uvicorn, draining the app's runs before it closes connections; and
the API served by this process on a free port of 127.0.0.1 for as long as a block lasts (what
`omniforge chat` talks to when no server is named, and what the tests serve)."""

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

from app.api.state import AppState
from app.errors import OmniForgeError
from app.observability.json_logs import uvicorn_log_config
from app.tools.net.policy import ServiceListeners

KEEP_ALIVE_S = 75
"""How long an idle keep-alive connection is kept open. uvicorn's own 5 s is what httpx's
pools keep an idle connection for: a client then reuses a connection just as the server
closes it, and its request fails without an answer. Longer than the pools of the common
clients (httpx 5 s, aiohttp 15 s) and of load balancers (60 s), which thus close first."""


def listeners_of(app: FastAPI) -> ServiceListeners:
    """The ports `app` is served on (`create_app` makes the record; its server fills it as
    it binds them)."""
    listeners: ServiceListeners | None = getattr(app.state, "listeners", None)
    if listeners is None:  # an app `create_app` did not make
        listeners = app.state.listeners = ServiceListeners()
    return listeners


class ServerDidNotStart(OmniForgeError, RuntimeError):
    """uvicorn ended before serving (its log says why)."""


class DrainingServer(uvicorn.Server):
    """uvicorn that, on SIGTERM or SIGINT, first stops accepting connections and drains the
    app's runs (no new call starts; calls under way finish and are stored; runs are handed
    over; streams end with a hint to reconnect), then lets uvicorn close what is left — all
    within `grace_s`. Says when it is serving (`ready`), instead of being polled."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, *, grace_s: float) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()
        # The app's background loads wait for it: they would compete with the start-up.
        app.state.serving = self.ready
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app = app
        self._grace_s = grace_s

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        self.ready.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # At once, not at uvicorn's next tick: no call starts from the signal on.
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._begin_drain)

    def _begin_drain(self) -> None:
        state: AppState | None = getattr(self._app.state, "omniforge", None)
        if state is not None:
            state.runs.begin_drain()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._grace_s
        for server in self.servers:
            server.close()
        state: AppState | None = getattr(self._app.state, "omniforge", None)
        if state is not None:
            await state.runs.drain(self._grace_s)
        # What is left of the grace is uvicorn's, for requests still under way.
        self.config.timeout_graceful_shutdown = max(deadline - loop.time(), _REQUESTS_S)  # type: ignore[assignment]
        await super().shutdown(sockets)


# What requests under way get at least after the runs' drain.
_REQUESTS_S = 0.1


@asynccontextmanager
async def serve_locally(
    app: FastAPI, *, backlog: int = 2048, graceful_shutdown_s: int | None = 2
) -> AsyncIterator[str]:
    """Serves `app` on a free port of 127.0.0.1 until the block ends; yields its base URL."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that name TCP; without it
    # Nagle and delayed ACKs hold every small response back by some 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    port = sock.getsockname()[1]
    listeners_of(app).add(port)
    server = DrainingServer(
        uvicorn.Config(
            app,
            log_level="warning",
            log_config=uvicorn_log_config(app.state.settings.log_format),
            lifespan="on",
            timeout_graceful_shutdown=graceful_shutdown_s,
            timeout_keep_alive=KEEP_ALIVE_S,
            backlog=backlog,
        ),
        app,
        grace_s=graceful_shutdown_s or 0,
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    ready = asyncio.create_task(server.ready.wait())
    try:
        await asyncio.wait([serving, ready], return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            raise ServerDidNotStart("the service did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        ready.cancel()
        server.should_exit = True
        await serving
        sock.close()
