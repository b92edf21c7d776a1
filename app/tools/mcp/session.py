"""One MCP server's session, opened once and reused by every call and run until it fails.

The SDK's streamable-HTTP client and `ClientSession` are async context managers: a background
task enters them and holds them open; callers talk to the session object it publishes. After
a failure the next call opens a new session (lazily; nothing retries in the background)."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from pydantic import ValidationError

from app.chain import ErrorCode
from app.errors import OmniForgeError
from app.tools.errors import ToolError, ToolTimeoutError
from app.tools.mcp.transport import PinnedTransport, pinned_client
from app.tools.services import NetworkPolicy

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="omniforge", version="0.1.0")
# A paginated tools/list that never ends must not hang discovery.
MAX_LIST_PAGES = 100
# How long a call that saw the session drop waits for it to say why.
_CAUSE_WAIT_S = 1.0

HeaderSource = Callable[[], Awaitable[Mapping[str, str]]]
ProgressSink = Callable[[str, float | None], None]


@dataclass(frozen=True, slots=True)
class Health:
    """Whether the server answered the last time it was asked; `detail` says why not."""

    ok: bool
    detail: str | None = None


class _SessionEnded(OmniForgeError):
    """The session to retry on: the server dropped it before handling the request."""


@dataclass(eq=False)
class _Live:
    """An open session and the task that holds it open."""

    transport: PinnedTransport
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    session: ClientSession | None = None
    # The session's JSON-RPC layer: requests whose answers are read as sent (tools/list).
    dispatcher: JSONRPCDispatcher | None = None
    task: "asyncio.Task[None] | None" = None
    # Why the session ended, when it failed.
    failure: str | None = None
    # Open it anew before the next call (its headers' secrets may have changed).
    stale: bool = False

    @property
    def usable(self) -> bool:
        return self.session is not None and not self.ended.is_set() and not self.stale

    async def close(self) -> None:
        self.closing.set()
        if self.task is None:
            return
        _, pending = await asyncio.wait({self.task}, timeout=5.0)
        for task in pending:  # a server that never answers the session's DELETE
            task.cancel()
            await asyncio.wait({task})


class McpConnection:
    """The session to one MCP server at `url`: opened on first use, with `headers()` resolved
    then, the URL checked against `network` by the SSRF guard and the connection pinned to the
    address checked; reused by every call until it fails or `reopen()` is asked for.

    `on_tools_changed` is called when the server says its tools changed; `on_health` when the
    server starts or stops answering (a success after a success reports nothing).
    """

    def __init__(
        self,
        url: str,
        *,
        server: str,
        headers: HeaderSource,
        network: NetworkPolicy,
        timeout_s: float,
        on_tools_changed: Callable[[], None] | None = None,
        on_health: Callable[[Health], Awaitable[None]] | None = None,
        health: Health | None = None,
    ) -> None:
        self.url = url
        self.server = server
        self._headers = headers
        self._network = network
        self._timeout_s = timeout_s
        self._on_tools_changed = on_tools_changed
        self._on_health = on_health
        self._health = health
        self._live: _Live | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        # Sessions opened so far (a handshake each).
        self.opened = 0

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists, all pages, as it sent them: one tool it describes
        badly must not cost the others (discovery checks each)."""
        tools: list[dict[str, Any]] = []

        async def listing(live: _Live) -> None:
            assert live.dispatcher is not None
            tools.clear()
            params: dict[str, Any] | None = None
            for _ in range(MAX_LIST_PAGES):
                page = await live.dispatcher.send_raw_request(
                    "tools/list", params, {"timeout": self._timeout_s}
                )
                listed = page.get("tools")
                if not isinstance(listed, list):
                    raise ValueError("its answer to tools/list holds no list of tools")
                tools.extend(item for item in listed if isinstance(item, dict))
                cursor = page.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    return
                params = {"cursor": cursor}

        await self._request("tools/list", listing)
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, on_progress: ProgressSink | None = None
    ) -> types.CallToolResult:
        """The server's result, `isError` ones included. MCP progress notifications of the
        call go to `on_progress(message, fraction)` while it runs."""
        results: list[types.CallToolResult] = []
        finished = False

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            if finished or on_progress is None:  # a report that came after the result
                return
            fraction = progress / total if total else None
            if not message:
                message = f"{progress:g} of {total:g}" if total else f"{progress:g}"
            on_progress(message, fraction)

        async def call(live: _Live) -> None:
            assert live.session is not None
            result = await live.session.call_tool(
                name,
                arguments,
                read_timeout_seconds=self._timeout_s,
                progress_callback=forward if on_progress is not None else None,
            )
            results.append(result)

        try:
            await self._request(f"tool {name!r}", call)
        finally:
            finished = True
        return results[-1]

    def expire(self) -> None:
        """The next request opens a new session, this one serving those under way."""
        if self._live is not None:
            self._live.stale = True

    async def reopen(self) -> None:
        """The next request opens a new session (with its headers resolved anew)."""
        async with self._lock:
            live, self._live = self._live, None
        if live is not None:
            await live.close()

    async def aclose(self) -> None:
        self._closed = True
        await self.reopen()

    async def _request(self, what: str, send: Callable[[_Live], Awaitable[None]]) -> None:
        for attempt in (1, 2):
            live = await self._session()
            try:
                await send(live)
            except MCPError as exc:
                try:
                    error = await self._failure(live, what, exc)
                except _SessionEnded:
                    if attempt == 1:
                        continue
                    error = self._unavailable(f"it ended the session again: {exc.message}")
                if error.error_code is ErrorCode.TOOL_UNAVAILABLE:
                    await self._report(Health(False, error.message))
                raise error from None
            except (ValidationError, RuntimeError, ValueError) as exc:
                # An answer the SDK cannot read as the result it asked for.
                raise ToolError(
                    f"the MCP server {self.server!r} answered {what} with what is not a "
                    f"valid result: {_first_line(exc)}"
                ) from None
            await self._report(Health(True))
            return

    async def _session(self) -> _Live:
        live = self._live
        if live is not None and live.usable:
            return live
        async with self._lock:
            if self._closed:
                raise self._unavailable("its session was closed")
            live = self._live
            if live is not None and live.usable:
                return live
            self._live = None
            if live is not None:
                await live.close()
            try:
                self._live = await self._open()
            except ToolError as exc:
                await self._report(Health(False, exc.message))
                raise
            return self._live

    async def _open(self) -> _Live:
        headers = dict(await self._headers())
        client, transport = await pinned_client(self.url, self._network, headers, self._timeout_s)
        live = _Live(transport)
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        live.task = asyncio.create_task(self._hold(client, live, ready))
        try:
            async with asyncio.timeout(self._timeout_s):
                await asyncio.shield(ready)
        except TimeoutError:
            await live.close()
            raise self._unavailable(
                f"it did not complete the MCP handshake within {self._timeout_s:g} s"
            ) from None
        except asyncio.CancelledError:
            await live.close()
            raise
        except Exception:
            await live.close()
            raise self._unavailable(live.failure or "the handshake failed") from None
        self.opened += 1
        return live

    async def _hold(self, client: Any, live: _Live, ready: "asyncio.Future[ClientSession]") -> None:
        """The session's task: opens it, publishes it, holds it until it is closed or fails."""
        try:
            async with client, streamable_http_client(self.url, http_client=client) as streams:
                dispatcher = JSONRPCDispatcher(*streams)
                session = ClientSession(
                    read_timeout_seconds=self._timeout_s,
                    message_handler=self._on_message,
                    client_info=CLIENT_INFO,
                    dispatcher=dispatcher,
                )
                async with session:
                    await session.initialize()
                    live.session, live.dispatcher = session, dispatcher
                    ready.set_result(session)
                    await live.closing.wait()
        except asyncio.CancelledError:
            live.failure = live.failure or "the session was cancelled"
        except BaseException as exc:  # the transport's task group fails as a group
            live.failure = _describe(exc, live.transport)
            if not live.closing.is_set():
                logger.info("MCP session to %r ended: %s", self.server, live.failure)
        finally:
            live.ended.set()
            if not ready.done():
                ready.set_exception(ConnectionError(live.failure or "the session ended"))
                ready.exception()  # retrieved here: a waiter may have gone already

    async def _failure(self, live: _Live, what: str, exc: MCPError) -> ToolError:
        """The ToolError of an MCP error answer; `_SessionEnded` when the request is worth
        sending again on a new session."""
        http_error = live.transport.last_error
        if exc.code == types.REQUEST_TIMEOUT:
            return ToolTimeoutError(
                f"the MCP server {self.server!r} did not answer {what} within {self._timeout_s:g} s"
            )
        if exc.code == types.CONNECTION_CLOSED:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CAUSE_WAIT_S):
                    await live.ended.wait()
            return self._unavailable(live.failure or exc.message)
        if http_error is not None and http_error.startswith("HTTP 404"):
            # The server no longer knows the session (it restarted, or ended it): the
            # request was not handled; a new session may send it.
            live.stale = True
            raise _SessionEnded
        if exc.code == types.INTERNAL_ERROR and http_error is not None:
            if http_error.startswith(("HTTP 401", "HTTP 403")):
                live.stale = True  # its secrets may have changed since it opened
            return self._unavailable(f"it answered {http_error}")
        code = ErrorCode.INVALID_ARGUMENTS if exc.code == types.INVALID_PARAMS else None
        return ToolError(
            f"the MCP server {self.server!r} refused {what}: {exc.message}", error_code=code
        )

    def _unavailable(self, reason: str) -> ToolError:
        return ToolError(
            f"the MCP server {self.server!r} is unavailable: {reason}",
            error_code=ErrorCode.TOOL_UNAVAILABLE,
        )

    async def _report(self, health: Health) -> None:
        if health == self._health or self._on_health is None:
            self._health = health
            return
        self._health = health
        try:
            await self._on_health(health)
        except Exception:  # the call's outcome stands whether its status is stored or not
            logger.exception("could not record the status of MCP server %r", self.server)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            if self._on_tools_changed is not None:
                self._on_tools_changed()
        elif isinstance(message, Exception):
            logger.debug("MCP server %r: transport error %s", self.server, _first_line(message))


def _describe(exc: BaseException, transport: PinnedTransport) -> str:
    """One line on why a session failed: the innermost error of a group, or the server's HTTP
    error answer."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and transport.last_error is not None:
        return f"it answered {transport.last_error}"
    text = _first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:500]
