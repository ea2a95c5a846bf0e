"""The MCP benchmark's peer: a FastMCP proxy (its default settings) in front of the upstream.

Runs in the bench peers' own venv (``make bench`` creates ``.venv-bench-peers`` with the
pinned ``fastmcp``), as a script: ``<peers python> fastmcp_proxy.py UPSTREAM_URL PORT``. It
imports nothing from toolkeeper (that venv has only fastmcp and its dependencies).
"""

from __future__ import annotations

import sys


def main(upstream: str, port: int) -> None:
    from fastmcp.server import create_proxy

    create_proxy(upstream).run(transport="http", host="127.0.0.1", port=port,
                               show_banner=False)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
