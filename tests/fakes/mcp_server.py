"""A real MCP server for tests and benchmarks: the `mcp` SDK's low-level server over
streamable HTTP, served by uvicorn on 127.0.0.1 (a free port, kept across a stop and a start).

Its tools: `add` (two numbers), `whoami` (needs `Authorization: Bearer <token>`: answers who
the token is, or an error echoing what it got, as careless servers do) and `slow_count`
(counts to `n`, reporting progress at each step; a `gate` given holds each step until the
test sets it). A `http_token` makes it answer 401 at the HTTP level, as a gateway would. Tests
may list more tools (`extra_tools`, e.g. with an invalid schema) and change the list while
sessions are open (`change_tools`, which notifies them). With `echo_encoded`, its errors echo
the `Authorization` header it got upper-cased and base64-encoded, and with `fail_listing` its
`tools/list` fails so, as servers that quote their request in an error do.

It records what it received: every tool call with its arguments and headers, how many MCP
handshakes (`initialize`) it answered, and which sessions its calls came on.

Standalone, for benchmarks: `python tests/fakes/mcp_server.py --port 0` prints one line
`READY <url>` once listening and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import mcp_types as types
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

TOKEN = "tok-" + "s3cr3t" * 4
SUBJECT = "robot@example.com"

ADD = types.Tool(
    name="add",
    description="Adds two numbers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
)
WHOAMI = types.Tool(
    name="whoami",
    description="Says who the caller's bearer token belongs to.",
    input_schema={"type": "object", "properties": {}},
)
SLOW_COUNT = types.Tool(
    name="slow_count",
    description="Counts from 1 to n, reporting progress at each step.",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 100}},
        "required": ["n"],
    },
)


@dataclass(frozen=True)
class ReceivedCall:
    tool: str
    arguments: dict[str, Any]
    authorization: str | None
    session_id: str | None


@dataclass
class _Counting:
    """Counts handshakes and keeps each session, to notify them."""

    server: FakeMcpServer

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            self.server.initializations += 1
        if ctx.session not in self.server._sessions:
            self.server._sessions.append(ctx.session)
        return await call_next(ctx)


@dataclass
class FakeMcpServer:
    token: str = TOKEN
    # When set, every HTTP request needs `Authorization: Bearer <http_token>` (else 401).
    http_token: str | None = None
    extra_tools: list[types.Tool] = field(default_factory=list)
    # When given, each step of slow_count waits for it to be set.
    gate: asyncio.Event | None = None
    # Errors echo the Authorization header upper-cased and in base64; tools/list fails so.
    echo_encoded: bool = False
    fail_listing: bool = False
    calls: list[ReceivedCall] = field(default_factory=list)
    initializations: int = 0
    list_requests: int = 0
    _sessions: list[ServerSession] = field(default_factory=list)
    _port: int = 0
    _uvicorn: uvicorn.Server | None = None
    _serving: asyncio.Task[None] | None = None
    _socket: socket.socket | None = None

    def __post_init__(self) -> None:
        self._server: Server[Any] = Server(
            "fake-mcp", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )
        self._server.middleware.append(_Counting(self))
        self.step_reached = asyncio.Condition()
        self.listed = asyncio.Condition()
        self.steps_done = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/mcp"

    @property
    def port(self) -> int:
        return self._port

    @property
    def sessions(self) -> set[str]:
        """The MCP session ids the server's tool calls came on."""
        return {call.session_id for call in self.calls if call.session_id}

    def tools(self) -> list[types.Tool]:
        return [ADD, WHOAMI, SLOW_COUNT, *self.extra_tools]

    async def start(self) -> None:
        """Serves on the port it had before a `stop`, or a free one."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        sock.listen(128)
        self._port = sock.getsockname()[1]
        self._socket = sock
        # The SDK's session manager runs once per app: a restart serves a new one.
        app: Any = self._server.streamable_http_app()
        if self.http_token is not None:
            app = _BearerOnly(app, self.http_token)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        self._uvicorn = _Server(config)
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[sock]))
        ready = asyncio.create_task(self._uvicorn.ready.wait())
        await asyncio.wait([self._serving, ready], return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            raise RuntimeError("the fake MCP server did not start")

    async def end_sessions(self) -> None:
        """Ends every session, as a server that restarted would have lost them: their next
        request is answered 404."""
        manager = self._server.session_manager
        for transport in list(manager._server_instances.values()):
            await transport.terminate()
        self._sessions.clear()

    async def stop(self) -> None:
        """Ends every session (its open streams with it) and stops serving."""
        if self._uvicorn is None or self._serving is None:
            return
        await self.end_sessions()
        self._uvicorn.should_exit = True
        await self._serving
        if self._socket is not None:
            self._socket.close()
        self._uvicorn = self._serving = self._socket = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.gate is not None:
            self.gate.set()
        await self.stop()

    async def change_tools(self, extra: Sequence[types.Tool]) -> None:
        """Lists `extra` besides the three tools from now on, and tells every open session."""
        self.extra_tools = list(extra)
        for session in list(self._sessions):
            await session.send_tool_list_changed()

    async def wait_for_step(self, step: int) -> None:
        """Until slow_count has reported `step` steps (of all its calls)."""
        async with self.step_reached:
            await self.step_reached.wait_for(lambda: self.steps_done >= step)

    def calls_of(self, tool: str) -> list[ReceivedCall]:
        return [call for call in self.calls if call.tool == tool]

    async def wait_for_list_request(self, count: int) -> None:
        """Until the server has answered `count` tools/list requests in all."""
        async with self.listed:
            await self.listed.wait_for(lambda: self.list_requests >= count)

    @property
    def open_sessions(self) -> int:
        """The sessions the server holds open now (not ended by their client or by it)."""
        if self._uvicorn is None:
            return 0
        return len(self._server.session_manager._server_instances)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        async with self.listed:
            self.list_requests += 1
            self.listed.notify_all()
        if self.fail_listing:
            headers = getattr(ctx.request, "headers", None) or {}
            echoed = self._echo(headers.get("authorization"))
            raise MCPError(types.INTERNAL_ERROR, f"cannot list tools for {echoed}")
        return types.ListToolsResult(tools=self.tools())

    def _echo(self, authorization: str | None) -> str:
        """What its errors say of the Authorization header they got."""
        if not self.echo_encoded or authorization is None:
            return repr(authorization)
        encoded = base64.b64encode(authorization.encode()).decode()
        return f"AUTHORIZATION: {authorization.upper()} (base64 {encoded})"

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        headers = getattr(ctx.request, "headers", None) or {}
        self.calls.append(
            ReceivedCall(
                params.name,
                arguments,
                headers.get("authorization"),
                headers.get("mcp-session-id"),
            )
        )
        match params.name:
            case "add":
                total = arguments["a"] + arguments["b"]
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"{total:g}")]
                )
            case "whoami":
                authorization = headers.get("authorization")
                if authorization != f"Bearer {self.token}":
                    # Echoes what it got, as careless servers do: callers must mask it.
                    return _error(
                        f"401 unauthorized: {self._echo(authorization)} is not a token it knows"
                    )
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=SUBJECT)],
                    structured_content={"subject": SUBJECT},
                )
            case "slow_count":
                n = int(arguments["n"])
                for step in range(1, n + 1):
                    if self.gate is not None:
                        await self.gate.wait()
                    await ctx.session.report_progress(step, n, f"counted {step}")
                    async with self.step_reached:
                        self.steps_done += 1
                        self.step_reached.notify_all()
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"counted to {n}")]
                )
        return _error(f"no tool named {params.name!r}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@dataclass
class _BearerOnly:
    """Answers 401 to any request without the bearer token, as a gateway in front would."""

    app: Any
    token: str

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


async def _serve(port: int) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    server = FakeMcpServer(_port=port)
    async with server:
        print(f"READY {server.url}", flush=True)
        await stopping.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the fake MCP server (streamable HTTP).")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.port))


if __name__ == "__main__":
    main()
