"""A TCP proxy on 127.0.0.1 that can cut every connection through it at once: a dropped
network, as a browser sees it. It records what each connection's client sent first (the
request head), so a test can see what a reconnecting client asked for."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CuttingProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._open: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()
        self.requests: list[bytes] = []
        self.port = 0

    @asynccontextmanager
    async def running(self) -> AsyncIterator["CuttingProxy"]:
        server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            self.cut()
            await server.wait_closed()
            for pump in list(self._pumps):
                pump.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Drops every open connection, both ways."""
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        self._open |= {writer, upstream_writer}
        head = await reader.read(65536)
        self.requests.append(head)
        upstream_writer.write(head)
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            pump = asyncio.create_task(_pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    sink.transport.abort()
