"""Why an upstream MCP server was not reached (raised by the pool and its HTTP client)."""


class UpstreamUnavailable(Exception):
    """The server could not be reached or connected (nothing was sent)."""
