"""A tool of a tenant's MCP server as a `BaseTool`: its call goes to the server's session."""

from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import ToolError
from app.tools.mcp.discovery import McpToolSpec
from app.tools.mcp.results import error_text, result_images, result_value
from app.tools.mcp.session import McpConnection
from app.tools.models import ToolCallContext, ToolDefinition, ToolOutput, ToolPermissions


class McpTool(BaseTool):
    """`spec` of the server behind `connection`, named `name` for runs; callers need one of
    `required_roles`."""

    def __init__(
        self,
        connection: McpConnection,
        name: str,
        spec: McpToolSpec,
        *,
        required_roles: tuple[str, ...] = (),
        timeout_s: float,
    ) -> None:
        self._connection = connection
        self._remote = spec.remote
        self._definition = ToolDefinition(
            name=name,
            type=ToolType.MCP,
            description=spec.description,
            parameters=spec.parameters,
            # The session's own timeout answers first, with a clearer message; this one is
            # the backstop for the handshake of a session opened for the call.
            timeout_s=min(timeout_s * 2, 3600),
            idempotent=spec.idempotent,
            permissions=ToolPermissions(required_roles=required_roles),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        result = await self._connection.call_tool(
            self._remote, arguments, on_progress=context.progress
        )
        if result.is_error:
            raise ToolError(
                f"{self._remote!r} of MCP server {self._connection.server!r} answered an "
                f"error: {error_text(result)}"
            )
        return ToolOutput(result_value(result), images=result_images(result))
