"""A session to a real MCP server (the SDK's, over streamable HTTP on 127.0.0.1): opened once
and reused, progress forwarded, list changes announced, failures told apart and recovered
from, and nothing reached that the SSRF guard refuses."""

import asyncio
from collections.abc import AsyncIterator, Mapping

import pytest

from app.chain import ErrorCode
from app.tools.errors import ErrorClass, ToolError
from app.tools.mcp import Health, McpConnection
from app.tools.services import NetworkPolicy
from tests.fakes.mcp_server import SLOW_COUNT, SUBJECT, TOKEN, FakeMcpServer

LOOPBACK = NetworkPolicy.of(["127.0.0.1/32"])


@pytest.fixture
async def server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


class Headers:
    """A header source that counts how often it was asked (once per session opened)."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.resolved = 0

    async def __call__(self) -> Mapping[str, str]:
        self.resolved += 1
        return {"Authorization": f"Bearer {self.token}"}


def connect(
    server: FakeMcpServer,
    *,
    headers: Headers | None = None,
    network: NetworkPolicy = LOOPBACK,
    url: str | None = None,
    timeout_s: float = 10.0,
    **callbacks: object,
) -> McpConnection:
    return McpConnection(
        url or server.url,
        server="fake",
        headers=headers or Headers(),
        network=network,
        timeout_s=timeout_s,
        **callbacks,  # type: ignore[arg-type]
    )


async def test_calls_reuse_one_session(server: FakeMcpServer) -> None:
    headers = Headers()
    connection = connect(server, headers=headers)
    try:
        tools = await connection.list_tools()
        results = await asyncio.gather(
            *(connection.call_tool("add", {"a": i, "b": 1}) for i in range(10))
        )
        for i in range(10):
            await connection.call_tool("add", {"a": i, "b": 2})
    finally:
        await connection.aclose()

    assert [tool["name"] for tool in tools] == ["add", "whoami", "slow_count"]
    assert [result.content[0].text for result in results] == [  # type: ignore[union-attr]
        str(i + 1) for i in range(10)
    ]
    assert server.initializations == 1
    assert len(server.sessions) == 1
    assert len(server.calls) == 20
    assert connection.opened == 1
    assert headers.resolved == 1


async def test_the_server_receives_the_arguments_and_the_headers(server: FakeMcpServer) -> None:
    connection = connect(server)
    try:
        added = await connection.call_tool("add", {"a": 2, "b": 3.5})
        who = await connection.call_tool("whoami", {})
    finally:
        await connection.aclose()

    assert server.calls[0].arguments == {"a": 2, "b": 3.5}
    assert added.content[0].text == "5.5"  # type: ignore[union-attr]
    assert server.calls[1].authorization == f"Bearer {TOKEN}"
    assert who.structured_content == {"subject": SUBJECT}
    assert not who.is_error


async def test_progress_is_forwarded_in_order(server: FakeMcpServer) -> None:
    reports: list[tuple[str, float | None]] = []
    connection = connect(server)
    try:
        result = await connection.call_tool(
            "slow_count", {"n": 4}, on_progress=lambda message, f: reports.append((message, f))
        )
    finally:
        await connection.aclose()

    assert result.content[0].text == "counted to 4"  # type: ignore[union-attr]
    assert reports == [
        ("counted 1", 0.25),
        ("counted 2", 0.5),
        ("counted 3", 0.75),
        ("counted 4", 1.0),
    ]


async def test_a_list_change_is_announced(server: FakeMcpServer) -> None:
    changed = asyncio.Event()
    connection = connect(server, on_tools_changed=changed.set)
    try:
        await connection.list_tools()
        await server.change_tools([SLOW_COUNT.model_copy(update={"name": "count_again"})])
        await asyncio.wait_for(changed.wait(), timeout=10)
        tools = await connection.list_tools()
    finally:
        await connection.aclose()

    assert tools[-1]["name"] == "count_again"


async def test_a_stopped_server_is_unavailable_and_reached_again_once_back(
    server: FakeMcpServer,
) -> None:
    health: list[Health] = []

    async def record(state: Health) -> None:
        health.append(state)

    connection = connect(server, on_health=record)
    try:
        await connection.call_tool("add", {"a": 1, "b": 1})
        await server.stop()
        failures: list[ToolError] = []
        for _ in range(2):  # the session that was open, then a new one that cannot open
            with pytest.raises(ToolError) as failure:
                await connection.call_tool("add", {"a": 1, "b": 1})
            failures.append(failure.value)
        await server.start()
        back = await connection.call_tool("add", {"a": 2, "b": 2})
    finally:
        await connection.aclose()

    for error in failures:
        assert error.error_code is ErrorCode.TOOL_UNAVAILABLE
        assert error.message.startswith("the MCP server 'fake' is unavailable: ")
        assert "ConnectError" in error.message
    assert back.content[0].text == "4"  # type: ignore[union-attr]
    assert server.initializations == 2
    assert [state.ok for state in health] == [True, False, True]  # changes only


async def test_a_session_the_server_ended_is_replaced_and_the_call_sent_again(
    server: FakeMcpServer,
) -> None:
    connection = connect(server)
    try:
        await connection.call_tool("add", {"a": 1, "b": 1})
        await server.end_sessions()
        again = await connection.call_tool("add", {"a": 2, "b": 2})
    finally:
        await connection.aclose()

    assert again.content[0].text == "4"  # type: ignore[union-attr]
    assert server.initializations == 2
    assert len(server.calls_of("add")) == 2  # the refused request never reached the tool


async def test_a_refused_destination_is_never_reached(server: FakeMcpServer) -> None:
    connection = connect(server, network=NetworkPolicy())
    try:
        with pytest.raises(ToolError) as refused:
            await connection.call_tool("add", {"a": 1, "b": 1})
    finally:
        await connection.aclose()

    assert refused.value.error_code is ErrorCode.DESTINATION_REFUSED
    assert "127.0.0.1" in refused.value.message
    assert "allow-list" in refused.value.message
    assert server.initializations == 0
    assert server.calls == []


async def test_a_host_name_is_reached_at_the_address_checked_for_it(
    server: FakeMcpServer,
) -> None:
    url = server.url.replace("127.0.0.1", "localhost")
    connection = connect(server, url=url)
    try:
        result = await connection.call_tool("add", {"a": 1, "b": 2})
    finally:
        await connection.aclose()

    assert result.content[0].text == "3"  # type: ignore[union-attr]


async def test_headers_are_resolved_again_when_the_session_reopens(server: FakeMcpServer) -> None:
    headers = Headers(token="wrong")
    connection = connect(server, headers=headers)
    try:
        refused = await connection.call_tool("whoami", {})
        headers.token = TOKEN
        still = await connection.call_tool("whoami", {})  # the open session keeps its headers
        await connection.reopen()
        accepted = await connection.call_tool("whoami", {})
    finally:
        await connection.aclose()

    assert refused.is_error
    assert still.is_error
    assert not accepted.is_error
    assert "401 unauthorized" in refused.content[0].text  # type: ignore[union-attr]
    assert headers.resolved == 2
    assert server.initializations == 2


async def test_a_header_that_cannot_be_resolved_fails_the_call(server: FakeMcpServer) -> None:
    async def missing() -> Mapping[str, str]:
        raise ToolError("no secret named 'TOKEN'", error_code=ErrorCode.SECRET_NOT_FOUND)

    connection = McpConnection(
        server.url, server="fake", headers=missing, network=LOOPBACK, timeout_s=5
    )
    try:
        with pytest.raises(ToolError) as failure:
            await connection.call_tool("add", {"a": 1, "b": 1})
    finally:
        await connection.aclose()

    assert failure.value.error_code is ErrorCode.SECRET_NOT_FOUND
    assert server.initializations == 0


async def test_an_http_error_answer_is_named() -> None:
    async with FakeMcpServer(http_token="gateway-token") as server:
        connection = connect(server)  # sends the MCP token, not the gateway's
        try:
            with pytest.raises(ToolError) as failure:
                await connection.list_tools()
        finally:
            await connection.aclose()

    assert failure.value.error_code is ErrorCode.TOOL_UNAVAILABLE
    assert failure.value.message == (
        "the MCP server 'fake' is unavailable: it answered HTTP 401 Unauthorized"
    )


async def test_a_call_past_the_timeout_times_out_and_the_session_goes_on() -> None:
    gate = asyncio.Event()
    async with FakeMcpServer(gate=gate) as server:
        connection = connect(server, timeout_s=0.5)
        try:
            with pytest.raises(ToolError) as failure:
                await connection.call_tool("slow_count", {"n": 2})
            gate.set()
            after = await connection.call_tool("add", {"a": 1, "b": 1})
        finally:
            await connection.aclose()

    assert failure.value.error_class is ErrorClass.TIMEOUT
    assert (
        failure.value.message
        == "the MCP server 'fake' did not answer tool 'slow_count' within 0.5 s"
    )
    assert after.content[0].text == "2"  # type: ignore[union-attr]
    assert server.initializations == 1


async def test_a_closed_connection_opens_nothing(server: FakeMcpServer) -> None:
    connection = connect(server)
    await connection.aclose()

    with pytest.raises(ToolError) as failure:
        await connection.call_tool("add", {"a": 1, "b": 1})

    assert failure.value.error_code is ErrorCode.TOOL_UNAVAILABLE
    assert server.initializations == 0
