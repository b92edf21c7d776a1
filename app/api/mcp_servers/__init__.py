"""The mcp_servers resource of the API."""
