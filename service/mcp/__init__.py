"""The MCP program (`screenshot-service mcp`): the service as Model Context Protocol tools, a client of a running
API (server)."""
