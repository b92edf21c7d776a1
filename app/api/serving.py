"""The API served by this process on a free port of 127.0.0.1, for as long as a block lasts:
what `omniforge chat` talks to when no server is named (and what the tests serve)."""

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI

from app.observability.json_logs import uvicorn_log_config


class ServerDidNotStart(RuntimeError):
    """uvicorn ended before serving (its log says why)."""


class _Server(uvicorn.Server):
    """uvicorn that says when it is serving, instead of being polled."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


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
    server = _Server(
        uvicorn.Config(
            app,
            log_level="warning",
            log_config=uvicorn_log_config(app.state.settings.log_format),
            lifespan="on",
            timeout_graceful_shutdown=graceful_shutdown_s,
            backlog=backlog,
        )
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
