"""A Server-Sent Events response that ends its stream the moment the client goes away."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.runs.channel import StreamItem

KEEPALIVE_FRAME = b": keep-alive\n\n"
EVENT_STREAM = "text/event-stream"


class EventStreamResponse(Response):
    """Streams pre-encoded events (`None` sends a keep-alive comment): stored events with
    their `id:`, live deltas without one, so that a client's Last-Event-ID stays the last
    stored event it got. A disconnect cancels the stream's reader only: whatever produces
    the events goes on."""

    media_type = EVENT_STREAM

    def __init__(
        self,
        events: AsyncIterator[StreamItem],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._events = events
        self.status_code = status_code
        self.background = None
        self.init_headers(
            {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        streaming = asyncio.ensure_future(self._stream(send))
        watching = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait([streaming, watching], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, watching):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await streaming
            with contextlib.suppress(asyncio.CancelledError):
                await watching
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _stream(self, send: Send) -> None:
        async for event in self._events:
            frame = KEEPALIVE_FRAME if event is None else event.frame
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
