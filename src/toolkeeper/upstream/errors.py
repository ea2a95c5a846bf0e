"""Why an upstream MCP server was not reached (raised by the pool and its HTTP client)."""

from typing import Protocol


class UpstreamUnavailable(Exception):
    """The server could not be reached or connected (nothing was sent)."""


class TokenRejected(Exception):
    """The upstream answered 401 to the gateway's bearer token, after one renewal: it
    refused before doing anything."""


class Bearer(Protocol):
    """Where an OAuth upstream's bearer token comes from (``toolkeeper.identity``)."""

    async def current(self) -> str: ...

    async def renew(self, stale: str) -> str: ...
