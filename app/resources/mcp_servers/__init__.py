"""A tenant's MCP servers: stored with what they offered when last asked (`store`), changed on
behalf of callers with their audit (`service`), and reached by runs through sessions kept open
(`sessions`)."""

from app.resources.mcp_servers.service import McpServerService, McpServersUnavailable
from app.resources.mcp_servers.sessions import McpServers, SecretValues, notes, offered
from app.resources.mcp_servers.store import McpServerExists, McpServerRecord

__all__ = [
    "McpServerExists",
    "McpServerRecord",
    "McpServerService",
    "McpServers",
    "McpServersUnavailable",
    "SecretValues",
    "notes",
    "offered",
]
