"""The one check every request's input passes before anything reads it.

- A body over `max_body_bytes` is refused with 413 as it arrives (`BodyLimit`).
- A JSON body must be UTF-8, JSON without `NaN`/`Infinity` or a number too large for a
  double (`1e400`, which would be read as infinity and stored as `null`), and nested at most
  `MAX_JSON_DEPTH` deep.
- No text of a request (its JSON body, path, query or `Last-Event-ID`) may hold U+0000 or a
  lone surrogate: no database stores either (see `app.storage.text`).

Body problems are found while the body is parsed (`CheckedRoute`), but answered like every
other input problem by `check_inputs`, which each route's caller dependency runs once the caller
is authenticated and permitted: 401, then 403, then 422, whatever the input. A 422 names the
field.
"""

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette._utils import get_route_path
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import PAYLOAD_TOO_LARGE, VALIDATION, ApiError, FieldProblem, problem_response
from app.storage.text import has_surrogates

MAX_JSON_DEPTH = 32
_BODY_PROBLEM = "omniforge.body_problem"
_CHECKED_HEADERS = ("last-event-id",)


def text_problem(text: str) -> str | None:
    """Why `text` cannot be accepted, or None."""
    if "\x00" in text:
        return "must not contain U+0000 (NUL)"
    if not has_surrogates(text):
        return None
    return "must not contain a lone surrogate (U+D800–U+DFFF)"


def _value_problem(value: Any, loc: str, depth: int = 0) -> FieldProblem | None:
    """The first problem of a parsed JSON value: text that cannot be stored, or nesting too
    deep."""
    if isinstance(value, str):
        reason = text_problem(value)
        return None if reason is None else FieldProblem(field=loc, message=reason)
    if isinstance(value, float) and not math.isfinite(value):  # only an overflow gets here
        return FieldProblem(field=loc, message="a number too large to store (beyond ±1.8e308)")
    if isinstance(value, dict | list) and depth >= MAX_JSON_DEPTH:
        return FieldProblem(field=loc, message=f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            reason = text_problem(key)
            if reason is not None:
                return FieldProblem(field=loc, message=f"a key {reason}")
            if (problem := _value_problem(item, f"{loc}.{key}", depth + 1)) is not None:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (problem := _value_problem(item, f"{loc}.{index}", depth + 1)) is not None:
                return problem
    return None


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json_body(body: bytes) -> tuple[Any, FieldProblem | None]:
    """A request body as JSON, or why it is not acceptable."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, FieldProblem(field="body", message=f"not UTF-8 (byte {exc.start})")
    try:
        value = json.loads(text, parse_constant=_not_a_number)
    except json.JSONDecodeError as exc:
        return None, FieldProblem(
            field="body", message=f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        )
    except ValueError as exc:  # NaN, Infinity
        return None, FieldProblem(field="body", message=f"not JSON: {exc}")
    except RecursionError:
        return None, FieldProblem(
            field="body", message=f"nested deeper than {MAX_JSON_DEPTH} levels"
        )
    return value, _value_problem(value, "body")


class CheckedRequest(Request):
    """A request whose JSON body is parsed strictly and never fails to parse: the problem is
    kept for `check_inputs` to answer in its turn."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            value, problem = parse_json_body(await self.body())
            if problem is not None:
                self.scope[_BODY_PROBLEM] = problem
            self._json = value
        return self._json


class CheckedRoute(APIRoute):
    """The route class of every router: its requests are `CheckedRequest`s. A request is
    matched against the app's routes in turn: a route whose path's literal start the
    request's path does not begin with is passed over without its pattern (the same answer,
    at a fraction of the cost, for most of the app's 120 routes on every request)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self._literal_start = path.partition("{")[0]

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if not get_route_path(scope).startswith(self._literal_start):
            return Match.NONE, {}
        return super().matches(scope)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            return await handler(CheckedRequest(request.scope, request.receive))

        return checked


def check_inputs(request: Request) -> None:
    """Refuses (422) a request whose body, path, query or `Last-Event-ID` holds text no
    database can store, or whose body could not be parsed; run by every caller dependency,
    after the caller's permission is checked."""
    problems: list[FieldProblem] = []
    body = request.scope.get(_BODY_PROBLEM)
    if isinstance(body, FieldProblem):
        problems.append(body)
    for name, value in request.path_params.items():
        if isinstance(value, str) and (reason := text_problem(value)):
            problems.append(FieldProblem(field=f"path.{name}", message=reason))
    for name, value in request.query_params.multi_items():
        if reason := text_problem(name):
            problems.append(FieldProblem(field="query", message=f"a parameter name {reason}"))
        elif reason := text_problem(value):
            problems.append(FieldProblem(field=f"query.{name}", message=reason))
    for header in _CHECKED_HEADERS:
        value = request.headers.get(header)
        if value is not None and (reason := text_problem(value)):
            problems.append(FieldProblem(field=f"header.{header}", message=reason))
    if problems:
        raise ApiError(VALIDATION, "the request is not valid; see `errors`", errors=problems)


# Routes that take larger bodies and cap them themselves while reading them (uploads, capped
# by `file_max_bytes`): `BodyLimit` lets them through.
OWN_BODY_LIMITS = frozenset({("POST", "/api/v1/files")})


class BodyLimit:
    """Refuses request bodies over `max_bytes` with 413: at once when `Content-Length` says
    so, else as soon as the bytes received pass it (nothing more is read). The routes of
    `OWN_BODY_LIMITS` apply their own limits."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) in OWN_BODY_LIMITS:
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The connection stays open: the server reads the rest of the body and drops it. Closing
        # with the body unread would reset the connection and could lose this very answer.
        detail = f"the request body is larger than {self.max_bytes} bytes"
        await problem_response(PAYLOAD_TOO_LARGE, detail)(scope, receive, send)


class BodyTooLarge(StarletteHTTPException):
    """A request body passed the limit while it was being read (an HTTP error, so that the
    body's reader passes it on: answered 413 like every HTTP error)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"the request body is larger than {max_bytes} bytes")
