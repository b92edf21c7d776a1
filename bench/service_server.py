"""Bench-only launcher: the service on a real uvicorn on 127.0.0.1, in a process of its own.

    python -m bench.service_server

Settings come from the `OMNIFORGE_*` environment like `omniforge serve`; the database must
already be migrated. Prints `READY <base_url>` once serving, serves until SIGTERM or SIGINT.
uvicorn runs with its defaults (uvloop, httptools) except that access logging is off.
"""

import logging
import socket

import uvicorn

from app.api import create_app
from app.config import Settings
from bench.service_harness import raise_open_files_limit

BACKLOG = 4096


class _Server(uvicorn.Server):
    """uvicorn that says when it is serving."""

    def __init__(self, config: uvicorn.Config, port: int) -> None:
        super().__init__(config)
        self._port = port

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            print(f"READY http://127.0.0.1:{self._port}", flush=True)


def main() -> None:
    raise_open_files_limit()
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that name TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(BACKLOG)
    config = uvicorn.Config(
        create_app(Settings()),
        log_level="warning",
        access_log=False,
        lifespan="on",
        backlog=BACKLOG,
        timeout_graceful_shutdown=2,
    )
    server = _Server(config, sock.getsockname()[1])
    server.run(sockets=[sock])  # on uvicorn's loop (uvloop when installed)


if __name__ == "__main__":
    main()
