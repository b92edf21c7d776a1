"""Answers while a store is unreachable: `503 service-unavailable`, never a 500 or a reset.

`StoreOutages` sits around everything that may reach a store (routes, their dependencies, the
authentication's tenant and API key look-ups, streaming responses), inside only `RequestIds`
and the CORS headers. An error that says a store cannot serve now (`unavailable`: the
database's connection failures, pool timeouts and retryable refusals as `is_store_outage` knows
them, and the limit store's `LimitStoreUnavailable`) ends here, whichever of them raised it.
A socket error or timeout that the database did not raise (a call to another service) is no
outage: it is the unexpected error it is (500), not "the database is unavailable":

- no response started yet: the answer is the `service-unavailable` problem with `Retry-After`
  and `Connection: close` (under `/v1/` with its OpenAI-style `error` member too); the client
  retries on a new connection, which a load balancer may give to a healthier instance. Not
  `close` after a request whose body may still be unread (longer than the server reads ahead,
  or of unknown length): a socket closed with bytes unread is reset, and the client may lose
  the answer. Its connection stays open; the server reads the rest of the body and drops it;
- a response started (a stream): its body is ended as a complete one, so the client sees the
  stream end and resumes it (`Last-Event-ID`) rather than a connection cut mid-chunk.

Either way one WARNING line is logged, without a traceback, and the error goes no further:
Starlette's error middleware would log it as an ERROR and re-raise it, and uvicorn then drops
the connection with no `Connection: close`, resetting the client's next request on it.

On the happy path this costs a `try` and nothing else: `send` is not wrapped. Whether a response
had started is learned after a failure, from the server: ASGI has a server raise on a message
out of turn (uvicorn raises `RuntimeError`), so the 503 is sent first and its refusal means a
response had started; ending that response's body is refused in turn when it was complete.
Hence the place outside `OpenAIErrorBodies`, which holds a problem's start back until its body
comes: a refusal would come late, from the body. The 503 is passed through it instead.
"""

import logging
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import RETRY_AFTER_S, unavailable_response
from app.api.openai_compat.errors import OpenAIErrorBodies
from app.governance.limits import LimitStoreUnavailable
from app.storage.errors import describe, is_store_outage

logger = logging.getLogger(__name__)

_END_OF_BODY: Message = {"type": "http.response.body", "body": b"", "more_body": False}
# How much of a request body uvicorn reads before it stops reading: a body no longer than this
# has been received whole, whether the app read it or not.
_READ_AHEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Unavailable:
    """What a request could not do for want of a store, and when to try it again."""

    what: str
    retry_after_s: float


def unavailable(error: BaseException) -> Unavailable | None:
    """What `error` says cannot be done now for want of a store, or None when it says
    anything else. A group of errors says so when each of its errors does."""
    if isinstance(error, BaseExceptionGroup):
        found = [unavailable(each) for each in error.exceptions]
        return found[0] if all(found) else None
    if isinstance(error, LimitStoreUnavailable):  # the limit windows and their record
        return Unavailable("the rate limits cannot be checked", error.retry_after_s)
    if is_store_outage(error):
        return Unavailable("the database is unavailable", RETRY_AFTER_S)
    return None


class StoreOutages:
    """Answers a request that failed because a store is unreachable, as the module says."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            outage = unavailable(exc)
            if scope["type"] != "http" or outage is None:
                raise
            await _answer(scope, receive, send, exc, outage)


async def _answer(
    scope: Scope, receive: Receive, send: Send, exc: Exception, outage: Unavailable
) -> None:
    request = f"{scope['method']} {scope['path']}"
    why = f"{outage.what} ({describe(exc)})"
    detail = f"{outage.what}; try again shortly"
    answer = OpenAIErrorBodies(
        unavailable_response(
            detail, retry_after_s=outage.retry_after_s, close=_body_received(scope)
        )
    )
    try:
        await answer(scope, receive, send)
    except Exception:  # refused by the server: a response had started
        pass
    else:
        logger.warning("%s answered 503: %s", request, why)
        return
    try:
        await send(_END_OF_BODY)
    except Exception:
        # Refused again: the response was complete (the failure came after it, from a
        # background task), or it declared a length it never reached: the server closes it.
        logger.warning("%s failed after its response: %s", request, why)
        return
    logger.warning("%s ended its stream early: %s", request, why)


def _body_received(scope: Scope) -> bool:
    """Whether the request's body, if any, has surely been received whole by the server."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.isdigit() and int(value) <= _READ_AHEAD_BYTES
        if name == b"transfer-encoding":
            return False
    return True
