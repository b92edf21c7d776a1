"""Remote MCP servers' tools as tools of ours: sessions kept open through the official `mcp`
SDK's streamable-HTTP client (`McpConnection`), discovery (`discover`) and the adapter that
calls a discovered tool (`McpTool`)."""

from typing import TYPE_CHECKING

from app.lazy import lazy_attributes
from app.tools.mcp.discovery import Discovery, McpToolSpec, discover, named, tool_name

if TYPE_CHECKING:
    from app.tools.mcp.session import Health, McpConnection
    from app.tools.mcp.tool import McpTool

# The sessions and the adapter import the `mcp` SDK (a third of a second of CPU): imported
# when a tenant's server is first reached, not when the service starts.
__getattr__ = lazy_attributes(
    __name__,
    {
        "Health": "app.tools.mcp.session",
        "McpConnection": "app.tools.mcp.session",
        "McpTool": "app.tools.mcp.tool",
    },
)

__all__ = [
    "Discovery",
    "Health",
    "McpConnection",
    "McpTool",
    "McpToolSpec",
    "discover",
    "named",
    "tool_name",
]
