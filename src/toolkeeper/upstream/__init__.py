"""Upstream MCP servers as governed tools (SPEC §7 MCP, §8): their settings, the pool of
reused connections (a lean HTTP client, the SDK's for stdio), importing their tools with
the upstream definition pinned by hash, and drift checks that quarantine. The ``mcp``
provider calls through the pool; nothing here serves MCP (that face is ``toolkeeper.mcp``).
"""
