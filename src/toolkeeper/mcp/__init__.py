"""The MCP face (SPEC §7 MCP): toolkeeper as an MCP server agents connect to, over
streamable HTTP (``/mcp``) and stdio. Upstream MCP servers are ``toolkeeper.upstream``.
The SDK is imported when MCP is first used, so a server nobody reaches over MCP pays
nothing for it at start-up."""
