"""A tool of a tenant's MCP server as a `BaseTool`: its call goes to the server's session."""

from typing import Any

from app.chain import ToolType
from app.tools.base import BaseTool
from app.tools.errors import ToolError
from app.tools.mcp.discovery import McpToolSpec
from app.tools.mcp.results import error_text, result_images, result_value
from app.tools.mcp.session import McpConnection
from app.tools.models import (
    Egress,
    ToolCallContext,
    ToolDefinition,
    ToolOutput,
    ToolPermissions,
)
from app.tools.services import SecretUse


class McpTool(BaseTool):
    """`spec` of the server behind `connection`, named `name` for runs; callers need one of
    `required_roles`. The server's headers send the tenant's `secrets` (by name): each call
    is a use of them by its run, refused (`secret_out_of_scope`) where their `usable_by`
    does not allow it."""

    def __init__(
        self,
        connection: McpConnection,
        name: str,
        spec: McpToolSpec,
        *,
        required_roles: tuple[str, ...] = (),
        timeout_s: float,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._connection = connection
        self._secrets = secrets
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
            # Another service's answer; what it is sent may go wherever that service acts.
            # What a tenant secret opens is not public.
            untrusted_output=True,
            private_output=bool(secrets),
            egress=Egress.ANY if spec.egress else Egress.NONE,
            permissions=ToolPermissions(required_roles=required_roles),
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: dict[str, Any], context: ToolCallContext) -> ToolOutput:
        resolver = None if context.services is None else context.services.secrets
        # Without a run's secrets (a library use) there is no caller to hold to a scope; the
        # session itself was opened only as the secrets' scopes let this server send them.
        if self._secrets and resolver is not None:
            use = SecretUse.in_call(context, "mcp_server", self._connection.server)
            await resolver.authorize(self._secrets, use)
        result = await self._connection.call_tool(
            self._remote, arguments, on_progress=context.progress
        )
        if result.is_error:
            raise ToolError(
                f"{self._remote!r} of MCP server {self._connection.server!r} answered an "
                f"error: {error_text(result)}"
            )
        return ToolOutput(result_value(result), images=result_images(result))
