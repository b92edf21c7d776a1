"""Tenant resources the tools reach: secrets, files, MCP servers, todo lists, network
allow-lists. Each binds its storage to one run's tenant and task as the tools' services
(`app.tools.services`); the API manages them."""
