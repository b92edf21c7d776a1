"""An unreachable store is answered 503 with `Retry-After` and `Connection: close` wherever it
surfaces (a route, a dependency, a middleware, a response before it starts); a stream it breaks
ends cleanly; an unexpected error is a 500 that closes the connection cleanly. On a real
uvicorn: what the server does with a connection is the point."""

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Iterator

import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.responses import StreamingResponse
from sqlalchemy.exc import OperationalError
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import install_error_handlers
from app.api.request_ids import RequestIds
from app.api.serving import serve_locally
from app.api.unavailable import StoreOutages, Unavailable, unavailable
from app.config import Settings
from app.governance.limits import LimitStoreUnavailable
from app.storage import Database
from app.storage.errors import StoreUnavailable
from tests.api.helpers import assert_no_internals, assert_problem


def refused() -> OperationalError:
    """What SQLAlchemy raises when the database refuses connections."""
    reason = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
    return OperationalError("SELECT 1", None, reason)


def needs_the_database() -> None:
    raise refused()


class FailingLookups:
    """Stands for the authentication: looks something up before the app, under `/lookup/`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/lookup/"):
            raise refused()
        await self.app(scope, receive, send)


class NotStartedYet(Response):
    """A response that fails on its way to its first byte."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise refused()


def outage_app() -> FastAPI:
    app = FastAPI()
    app.state.settings = Settings()
    install_error_handlers(app)
    app.add_middleware(FailingLookups)
    app.add_middleware(StoreOutages)
    app.add_middleware(RequestIds)

    @app.get("/ok")
    async def ok() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/route")
    async def route() -> None:
        raise refused()

    @app.get("/dependency", dependencies=[Depends(needs_the_database)])
    async def dependency() -> None:
        raise AssertionError("not reached")

    @app.get("/lookup/tasks")
    async def behind_a_lookup() -> None:
        raise AssertionError("not reached")

    @app.get("/unstarted")
    async def unstarted() -> Response:
        return NotStartedYet()

    @app.post("/v1/chat/completions")
    async def completion() -> None:
        raise refused()

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            yield b"id: 1\nevent: task_status\ndata: {}\n\n"
            raise refused()

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/after")
    async def after() -> JSONResponse:
        return JSONResponse({"status": "ok"}, background=BackgroundTask(needs_the_database))

    @app.post("/limited")
    async def limited() -> None:
        raise LimitStoreUnavailable("the database is unavailable", retry_after_s=2.5)

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError("a bug")

    @app.get("/elsewhere")
    async def elsewhere() -> None:
        await asyncio.open_connection("127.0.0.1", _a_closed_port())  # another service: down

    return app


@pytest.fixture(scope="module")
async def base_url() -> AsyncIterator[str]:
    async with serve_locally(outage_app()) as url:
        yield url


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._arrived = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._arrived.set()

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]

    async def first_at(self, level: int) -> str:
        """The first message at `level`, once logged (a background task logs after the
        response)."""
        async with asyncio.timeout(5):
            while not (messages := self.at(level)):
                self._arrived.clear()
                await self._arrived.wait()
        return messages[0]


@pytest.fixture
def logged() -> Iterator[Records]:
    """Log records of the app and of uvicorn (whose own loggers may not propagate)."""
    records = Records()
    loggers = [logging.getLogger(name) for name in ("app", "uvicorn.error")]
    for logger in loggers:
        logger.addHandler(records)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(records)


def one_connection(base_url: str) -> httpx.AsyncClient:
    """A client of one keep-alive connection at a time that never retries."""
    return httpx.AsyncClient(
        base_url=base_url,
        transport=httpx.AsyncHTTPTransport(retries=0),
        limits=httpx.Limits(max_connections=1),
        timeout=10,
    )


def assert_unavailable(response: httpx.Response) -> dict[str, object]:
    body = assert_problem(response, 503, "service-unavailable")
    assert response.headers["retry-after"] == "1"
    assert response.headers["connection"] == "close"
    assert response.headers["x-request-id"]
    assert "the database is unavailable" in str(body["detail"])
    assert_no_internals(response)
    return body


@pytest.mark.parametrize(
    "path", ["/route", "/dependency", "/lookup/tasks", "/unstarted"], ids=lambda p: p[1:]
)
async def test_a_store_unreachable_before_the_response_started_answers_503_and_closes(
    base_url: str, path: str, logged: Records
) -> None:
    """From a route, a dependency, a middleware before the app (the authentication's
    look-ups), or a response on its way to its first byte."""
    async with one_connection(base_url) as client:
        failed = await client.get(path)
        after = await client.get("/ok")
    assert_unavailable(failed)
    assert after.status_code == 200
    warning = await logged.first_at(logging.WARNING)
    assert warning == (
        f"GET {path} answered 503: the database is unavailable (ConnectionRefusedError: "
        "[Errno 111] Connect call failed ('127.0.0.1', 5432))"
    )
    assert logged.at(logging.ERROR) == []


async def test_an_upload_refused_unread_answers_503_on_a_connection_kept_open_not_reset(
    base_url: str,
) -> None:
    """Closing with megabytes of it unread would reset the connection, losing the answer."""
    upload = b"x" * (20 * 1024 * 1024)
    async with one_connection(base_url) as client:
        small = await client.post("/lookup/tasks", content=b"x" * 1024)
        failed = await client.post("/lookup/tasks", content=upload)  # a reset would raise
        after = await client.get("/ok")
    assert small.headers["connection"] == "close"
    assert_problem(failed, 503, "service-unavailable")
    assert failed.headers["retry-after"] == "1"
    assert "connection" not in failed.headers
    assert after.status_code == 200


async def test_a_store_unreachable_under_v1_answers_503_with_the_openai_error_member(
    base_url: str,
) -> None:
    async with one_connection(base_url) as client:
        failed = await client.post("/v1/chat/completions", json={})
    body = assert_unavailable(failed)
    assert body["error"] == {
        "message": body["detail"],
        "type": "server_error",
        "code": "service-unavailable",
        "param": None,
    }


async def test_a_stream_the_store_breaks_after_it_started_ends_cleanly_with_a_warning(
    base_url: str, logged: Records
) -> None:
    async with one_connection(base_url) as client:
        async with client.stream("GET", "/stream") as streamed:
            body = await streamed.aread()  # a cut stream would raise RemoteProtocolError
        after = await client.get("/ok")
    assert streamed.status_code == 200
    assert body == b"id: 1\nevent: task_status\ndata: {}\n\n"
    assert after.status_code == 200
    assert await logged.first_at(logging.WARNING) == (
        "GET /stream ended its stream early: the database is unavailable "
        "(ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 5432))"
    )
    assert logged.at(logging.ERROR) == []


async def test_a_store_failing_after_the_response_was_complete_leaves_the_response_as_sent(
    base_url: str, logged: Records
) -> None:
    async with one_connection(base_url) as client:
        answered = await client.get("/after")
        after = await client.get("/ok")
    assert (answered.status_code, answered.json()) == (200, {"status": "ok"})
    assert after.status_code == 200
    warning = await logged.first_at(logging.WARNING)
    assert warning.startswith("GET /after failed after its response: the database is unavailable")
    assert logged.at(logging.ERROR) == []


async def test_an_unexpected_error_answers_500_with_connection_close_and_the_next_request_is_served(
    base_url: str, logged: Records
) -> None:
    async with one_connection(base_url) as client:
        failed = await client.get("/bug")
        after = await client.get("/ok")  # a reset here would raise
    assert_problem(failed, 500, "internal-error")
    assert failed.headers["connection"] == "close"
    assert_no_internals(failed)
    assert after.status_code == 200
    assert "unhandled error on GET /bug" in logged.at(logging.ERROR)


async def test_a_connection_refused_by_another_service_is_no_database_outage(
    base_url: str, logged: Records
) -> None:
    async with one_connection(base_url) as client:
        failed = await client.get("/elsewhere")
    assert_problem(failed, 500, "internal-error")
    assert_no_internals(failed)
    assert logged.at(logging.WARNING) == []
    assert "unhandled error on GET /elsewhere" in logged.at(logging.ERROR)


async def _raised_by(failing: Awaitable[object]) -> BaseException:
    try:
        await failing
    except Exception as exc:
        return exc
    raise AssertionError("it did not fail")


async def _open_a_database_at(port: int) -> None:
    database = Database(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres")
    try:
        async with database.read():
            pass
    finally:
        await database.dispose()


async def _time_out_on_its_own() -> None:
    async with asyncio.timeout(0):
        await asyncio.Event().wait()


async def test_errors_count_as_a_store_outage_only_when_a_retry_may_succeed() -> None:
    database = Unavailable("the database is unavailable", 1.0)
    port = _a_closed_port()
    # What the driver itself raises when the database refuses connections.
    from_the_driver = await _raised_by(_open_a_database_at(port))
    assert isinstance(from_the_driver, ConnectionRefusedError), repr(from_the_driver)
    assert unavailable(refused()) == database
    assert unavailable(from_the_driver) == database
    assert unavailable(StoreUnavailable("writes are paused")) == database
    assert unavailable(ExceptionGroup("both", [refused(), from_the_driver])) == database
    # The same errors raised by anything else say nothing of the database.
    elsewhere = await _raised_by(asyncio.open_connection("127.0.0.1", port))
    assert isinstance(elsewhere, ConnectionRefusedError)
    assert unavailable(elsewhere) is None
    assert unavailable(await _raised_by(_time_out_on_its_own())) is None
    assert unavailable(ConnectionResetError()) is None
    assert unavailable(ExceptionGroup("both", [refused(), TimeoutError()])) is None
    # Nor does a file the zone database has as a folder (`Europe`).
    assert unavailable(IsADirectoryError(21, "Is a directory")) is None
    assert unavailable(LimitStoreUnavailable("lost", retry_after_s=2.5)) == Unavailable(
        "the rate limits cannot be checked", 2.5
    )
    assert unavailable(ExceptionGroup("mixed", [refused(), ValueError()])) is None
    assert unavailable(RuntimeError("a bug")) is None


async def test_rate_limits_that_cannot_be_checked_answer_503_after_the_stores_retry_delay(
    base_url: str, logged: Records
) -> None:
    async with one_connection(base_url) as client:
        failed = await client.post("/limited")
    body = assert_problem(failed, 503, "service-unavailable")
    assert body["detail"] == "the rate limits cannot be checked; try again shortly"
    assert failed.headers["retry-after"] == "3"  # whole seconds, rounded up
    assert failed.headers["connection"] == "close"
    assert await logged.first_at(logging.WARNING) == (
        "POST /limited answered 503: the rate limits cannot be checked "
        "(LimitStoreUnavailable: the database is unavailable)"
    )


def _a_closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (it was bound and released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
