"""Remote MCP servers' tools as tools of ours: sessions kept open through the official `mcp`
SDK's streamable-HTTP client (`McpConnection`), discovery (`discover`) and the adapter that
calls a discovered tool (`McpTool`)."""

from app.tools.mcp.discovery import Discovery, McpToolSpec, discover, named, tool_name
from app.tools.mcp.session import Health, McpConnection
from app.tools.mcp.tool import McpTool

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
