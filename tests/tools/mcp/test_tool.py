"""An MCP server's tool through the whole executor: steps recorded as for any tool, the
server's error answers and its absence as failed results, its progress as the call's progress
reports between the call's step and its result; a tool the server annotates as idempotent
or read-only is one a resumed run may call again."""

from collections.abc import AsyncIterator, Iterable

import mcp_types as types
import pytest

from app.chain import ErrorCode, ToolType
from app.security.redaction import Redactor
from app.tools.executor import ToolExecutor
from app.tools.mcp import McpConnection, McpTool, McpToolSpec, discover, named
from app.tools.models import ToolProgress
from app.tools.registry import ToolRegistry
from app.tools.services import NetworkPolicy, SecretUse, ToolServices
from tests.factories import context_for, new_chain
from tests.fakes.mcp_server import FakeMcpServer


@pytest.fixture
async def server() -> AsyncIterator[FakeMcpServer]:
    async with FakeMcpServer() as server:
        yield server


@pytest.fixture
async def connection(server: FakeMcpServer) -> AsyncIterator[McpConnection]:
    async def headers() -> dict[str, str]:
        return {"Authorization": "Bearer not-the-token"}

    connection = McpConnection(
        server.url,
        server="fake",
        headers=headers,
        network=NetworkPolicy.of(["127.0.0.1/32"]),
        timeout_s=10,
    )
    yield connection
    await connection.aclose()


async def executor_for(connection: McpConnection) -> ToolExecutor:
    found = discover("fake", await connection.list_tools())
    tools, _ = named("fake", found.tools)
    return ToolExecutor(
        ToolRegistry([McpTool(connection, name, spec, timeout_s=10) for name, spec in tools])
    )


async def test_a_call_is_recorded_as_any_tool_call(
    server: FakeMcpServer, connection: McpConnection
) -> None:
    executor = await executor_for(connection)
    chain = new_chain()

    result = await executor.execute(chain, context_for(chain), "fake__add", {"a": 2, "b": 3})

    assert result.success
    assert result.value == "5"
    assert result.call_step.tool_call is not None
    assert result.call_step.tool_call.tool_type is ToolType.MCP
    assert result.call_step.tool_call.arguments == {"a": 2, "b": 3}
    assert server.calls_of("add")[0].arguments == {"a": 2, "b": 3}


async def test_arguments_are_checked_against_the_servers_schema_before_it_is_called(
    server: FakeMcpServer, connection: McpConnection
) -> None:
    executor = await executor_for(connection)
    chain = new_chain()

    result = await executor.execute(chain, context_for(chain), "fake__add", {"a": "two"})

    assert result.error_code is ErrorCode.INVALID_ARGUMENTS
    assert server.calls == []


async def test_an_error_answer_is_a_failed_result_with_the_servers_words(
    connection: McpConnection,
) -> None:
    executor = await executor_for(connection)
    chain = new_chain()

    result = await executor.execute(chain, context_for(chain), "fake__whoami", {})

    assert not result.success
    assert result.error_code is ErrorCode.TOOL_ERROR
    assert result.error == (
        "'whoami' of MCP server 'fake' answered an error: "
        "401 unauthorized: 'Bearer not-the-token' is not a token it knows"
    )


async def test_a_server_that_is_gone_is_a_failed_result_not_an_exception(
    server: FakeMcpServer, connection: McpConnection
) -> None:
    executor = await executor_for(connection)
    await server.stop()
    chain = new_chain()

    result = await executor.execute(chain, context_for(chain), "fake__add", {"a": 1, "b": 1})

    assert result.error_code is ErrorCode.TOOL_UNAVAILABLE
    assert result.error is not None
    assert "is unavailable" in result.error


async def test_progress_comes_between_the_call_and_its_result(connection: McpConnection) -> None:
    executor = await executor_for(connection)
    chain = new_chain()
    reports: list[tuple[ToolProgress, int]] = []
    context = context_for(
        chain, on_progress=lambda report: reports.append((report, len(chain.steps)))
    )

    result = await executor.execute(chain, context, "fake__slow_count", {"n": 3})

    assert result.success
    assert result.value == "counted to 3"
    assert [(r.message, r.fraction) for r, _ in reports] == [
        ("counted 1", 1 / 3),
        ("counted 2", 2 / 3),
        ("counted 3", 1.0),
    ]
    assert all(report.call_step is result.call_step for report, _ in reports)
    assert {steps for _, steps in reports} == {1}  # the call's step only: before its result


class _Secrets:
    """A run's secrets, of which "counted 2" is one."""

    def __init__(self) -> None:
        self._redactor = Redactor(["counted 2"], mask="[secret]", min_chars=4)

    async def resolve(self, name: str, use: SecretUse | None = None) -> str:
        raise AssertionError("not resolved here")

    async def authorize(self, names: Iterable[str], use: SecretUse) -> None:
        return None

    def mask(self, text: str) -> str:
        return self._redactor(text)


async def test_progress_reports_are_masked_as_the_calls_result_is(
    connection: McpConnection,
) -> None:
    executor = await executor_for(connection)
    chain = new_chain()
    reports: list[str] = []
    context = context_for(
        chain,
        on_progress=lambda report: reports.append(report.message),
        services=ToolServices(secrets=_Secrets()),
    )

    result = await executor.execute(chain, context, "fake__slow_count", {"n": 3})

    assert result.success
    assert reports == ["counted 1", "[secret]", "counted 3"]


async def _no_headers() -> dict[str, str]:
    return {}


def test_the_definition_carries_the_roles_and_the_servers_description() -> None:
    spec = McpToolSpec("search", "Searches.", {"type": "object", "properties": {}})
    connection = McpConnection(
        "http://127.0.0.1:1/mcp",
        server="docs",
        headers=_no_headers,
        network=NetworkPolicy(),
        timeout_s=7,
    )

    definition = McpTool(
        connection, "docs__search", spec, required_roles=("ops",), timeout_s=7
    ).definition

    assert definition.name == "docs__search"
    assert definition.type is ToolType.MCP
    assert definition.description == "Searches."
    assert definition.permissions.required_roles == ("ops",)
    assert definition.parameters == spec.parameters
    assert definition.idempotent is False


_ANY: dict[str, object] = {"type": "object", "properties": {}}


async def test_tools_annotated_idempotent_or_read_only_may_be_repeated_and_no_others() -> None:
    annotated = [
        types.Tool(
            name="get_page",
            input_schema=_ANY,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="set_title",
            input_schema=_ANY,
            annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True),
        ),
        types.Tool(
            name="send_mail",
            input_schema=_ANY,
            annotations=types.ToolAnnotations(
                read_only_hint=False, idempotent_hint=False, destructive_hint=True
            ),
        ),
        types.Tool(
            name="titled", input_schema=_ANY, annotations=types.ToolAnnotations(title="Titled")
        ),
    ]
    async with FakeMcpServer(extra_tools=annotated) as server:
        connection = McpConnection(
            server.url,
            server="fake",
            headers=_no_headers,
            network=NetworkPolicy.of(["127.0.0.1/32"]),
            timeout_s=10,
        )
        try:
            found = discover("fake", await connection.list_tools())
        finally:
            await connection.aclose()
    tools, _ = named("fake", found.tools)

    definitions = [McpTool(connection, name, spec, timeout_s=10).definition for name, spec in tools]

    assert {definition.name: definition.idempotent for definition in definitions} == {
        "fake__add": False,  # no annotations
        "fake__whoami": False,
        "fake__slow_count": False,
        "fake__get_page": True,
        "fake__set_title": True,
        "fake__send_mail": False,
        "fake__titled": False,  # annotations without either hint
    }
