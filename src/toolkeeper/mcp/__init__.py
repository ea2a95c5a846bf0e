"""The MCP faces (SPEC §7 MCP, §8): toolkeeper as an MCP server agents connect to, and as a
governing client of upstream MCP servers. Submodules import the ``mcp`` SDK lazily, so the
REST server and the library pay for it only when MCP is used."""
