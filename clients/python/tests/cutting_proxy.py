"""A TCP proxy between a client and the service that cuts the first task stream it carries
after a number of stored events, as a dropped connection would."""

import asyncio
import contextlib
import re
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

# A stored event's frame: it has an `id:` line and ends with a blank line.
_STORED_FRAME = re.compile(rb"id: \d+\nevent: [^\n]*\ndata: [^\n]*\n\n")


class CuttingProxy:
    """Forwards every connection to `upstream`; on the first one that carries an event
    stream, forwards `cut_after` stored events (with `mid_frame`, the last of them only
    half) and then closes both sides without ending the response. `heads` keeps the request
    head of every connection, in order."""

    def __init__(self, upstream: str, *, cut_after: int, mid_frame: bool = False) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname is not None
        assert parts.port is not None
        self._upstream = (parts.hostname, parts.port)
        self._cut_after = cut_after
        self._mid_frame = mid_frame
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self.heads: list[str] = []
        self.cut = asyncio.Event()
        self.url = ""

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for pump in self._pumps:
            pump.cancel()
        for pump in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await pump
        await self._server.wait_closed()

    def last_event_ids(self) -> list[str | None]:
        """The `Last-Event-ID` each connection's request sent (None: none)."""
        found = []
        for head in self.heads:
            match = re.search(r"(?im)^last-event-id: *(\S+)", head)
            found.append(match.group(1) if match else None)
        return found

    async def _connection(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        server_r, server_w = await asyncio.open_connection(*self._upstream)
        head = await client_r.readuntil(b"\r\n\r\n")
        self.heads.append(head.decode("latin-1"))
        server_w.write(head)
        cutting = not self.cut.is_set() and b"/events" in head.split(b"\r\n", 1)[0]
        upward = asyncio.ensure_future(self._pump(client_r, server_w))
        downward = asyncio.ensure_future(
            self._cut(server_r, client_w, server_w) if cutting else self._pump(server_r, client_w)
        )
        self._pumps.update((upward, downward))
        await asyncio.wait([upward, downward], return_when=asyncio.FIRST_COMPLETED)
        for writer in (client_w, server_w):
            writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def _cut(
        self,
        reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        server: asyncio.StreamWriter,
    ) -> None:
        received = b""
        sent = 0
        while data := await reader.read(65536):
            received += data
            frames = list(_STORED_FRAME.finditer(received))
            if len(frames) >= self._cut_after:
                last = frames[self._cut_after - 1]
                end = (last.start() + last.end()) // 2 if self._mid_frame else last.end()
                client.write(received[sent:end])
                await client.drain()
                client.transport.abort()
                server.transport.abort()
                self.cut.set()
                return
            client.write(received[sent:])
            sent = len(received)
            await client.drain()
