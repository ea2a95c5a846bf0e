"""The upstream users run today, for the MCP benchmark's ``mcp_sdk1`` rows: a FastMCP server
of the 1.x SDK (``mcp==1.30.0``) with its defaults (stateful sessions, answers as SSE), one
tool ``pure`` (``x`` → ``"pure <x>"``), at ``http://127.0.0.1:PORT/mcp``.

``python -P sdk1_peer.py PORT``, with the interpreter of the venv ``make handshake-peers``
makes (``.venv-handshake-peers/mcp1``): it imports nothing of toolkeeper.
"""

from __future__ import annotations

import sys


def main(port: int) -> None:
    import uvicorn
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("bench-sdk1")

    @server.tool()
    def pure(x: int) -> str:
        """Echo x."""
        return f"pure {x}"

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port,
                log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
