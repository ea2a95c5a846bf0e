"""Providers: how a tool executes (native, function, http; mcp in the MCP face)."""
