"""Every HTTP request gets an id: the caller's `X-Request-ID` when it is a sane one (a proxy's or
a client's, so that their logs and ours meet), else a new one. It is echoed in the response's
`X-Request-ID` and carried by every log line the request causes (uvicorn's access line too)."""

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.ids import uuid4
from app.observability.log_context import request_logged_as

HEADER = "X-Request-ID"
_HEADER_KEY = HEADER.lower().encode("latin-1")
# Visible ASCII only: it goes into log lines and back into a response header as it came.
_SANE = re.compile(rb"[!-~]{1,128}")


class RequestIds:
    """Outermost middleware: every response, even one refused before routing, names its
    request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == _HEADER_KEY), None)
        request_id = (
            given.decode("ascii") if given is not None and _SANE.fullmatch(given) else uuid4().hex
        )
        header = (_HEADER_KEY, request_id.encode("ascii"))

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        with request_logged_as(request_id):
            await self.app(scope, receive, send_named)
