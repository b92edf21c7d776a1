"""A Server-Sent Events response that ends its stream the moment the client goes away."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.api.errors import VALIDATION, ApiError, FieldProblem
from app.runs.channel import StreamItem
from app.storage.errors import is_transient

logger = logging.getLogger(__name__)

KEEPALIVE_FRAME = b": keep-alive\n\n"
# What a stream ends with when its server drains: the client reconnects (to another instance,
# with its Last-Event-ID) half a second later.
RECONNECT_FRAME = b": the server is restarting; reconnect\nretry: 500\n\n"
EVENT_STREAM = "text/event-stream"


class EventStreamResponse(Response):
    """Streams pre-encoded events (`None` sends a keep-alive comment): stored events with
    their `id:`, live deltas without one, so that a client's Last-Event-ID stays the last
    stored event it got. A disconnect cancels the stream's reader only: whatever produces
    the events goes on. When `closing` is set (the server drains), the stream ends cleanly
    with a hint to reconnect at once, for the client to resume elsewhere where it left off."""

    media_type = EVENT_STREAM

    def __init__(
        self,
        events: AsyncIterator[StreamItem],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        closing: asyncio.Event | None = None,
    ) -> None:
        self._events = events
        self._closing = closing
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
        waits: list[asyncio.Future[Any]] = [streaming, watching]
        drained = False
        if self._closing is not None:
            waits.append(asyncio.ensure_future(self._closing.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            # Closed by the server while the stream went on and its client was still there.
            drained = not streaming.done() and not watching.done()
            if streaming.done() and not streaming.cancelled():
                failure = streaming.exception()
                if failure is not None and is_transient(failure):
                    # The store went away under a stream: it ends for the client to come back.
                    logger.warning("a stream ended: the store is unavailable (%s)", failure)
                    drained = True
        finally:
            for task in waits:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await streaming
            with contextlib.suppress(asyncio.CancelledError):
                await watching
            if drained:
                with contextlib.suppress(OSError):
                    reconnect = {"body": RECONNECT_FRAME, "more_body": True}
                    await send({"type": "http.response.body", **reconnect})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
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


MAX_SEQ = 2**31 - 1
"""Event ids and step numbers are 32-bit on every backend."""


def stream_position(last_event_id: str | None, after: int | None) -> int:
    """Where a subscriber resumes: `Last-Event-ID` (what a reconnecting EventSource sends)
    wins over `?after=`; 0 replays everything."""
    if last_event_id is not None and last_event_id.strip():
        value = last_event_id.strip()
        # Length first: Python refuses to convert thousands of digits at all.
        digits = value.isascii() and value.isdecimal() and len(value) <= len(str(MAX_SEQ))
        if not (digits and int(value) <= MAX_SEQ):
            raise ApiError(
                VALIDATION,
                "Last-Event-ID must be an event id of this stream",
                errors=[FieldProblem(field="header.Last-Event-ID", message="not an event id")],
            )
        return int(value)
    return after or 0
