"""The MCP face stands on its own: importing it, or serving an agent over stdio with
``toolkeeper mcp``, never loads the REST face (``toolkeeper.api``) nor FastAPI. Each check
runs in a fresh interpreter, so nothing an earlier test imported can hide a leak."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from toolkeeper.demo.runner import DEMO_CONFIG

REPORT = """
import atexit, json, sys
def report():
    with open({out!r}, "w") as f:
        json.dump(sorted(sys.modules), f)
atexit.register(report)
"""
"""Prefix of each child: at exit it writes the names of every loaded module to a file."""


def rest_modules(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m == "fastapi" or m.startswith(("fastapi.", "toolkeeper.api"))]


def test_importing_the_mcp_face_loads_no_rest(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    code = REPORT.format(out=str(out)) + (
        "import pkgutil, importlib, toolkeeper.mcp\n"
        "for m in pkgutil.iter_modules(toolkeeper.mcp.__path__):\n"
        "    importlib.import_module('toolkeeper.mcp.' + m.name)\n"
        "import toolkeeper.cli.mcp_cmd\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    loaded = json.loads(out.read_text())
    assert "toolkeeper.mcp.views" in loaded and "toolkeeper.mcp.server" in loaded
    assert rest_modules(loaded) == []


async def test_serving_over_stdio_loads_no_rest(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    code = REPORT.format(out=str(out)) + "from toolkeeper.cli import main\nmain()\n"
    params = StdioServerParameters(command=sys.executable, args=[
        "-c", code, "--db", f"sqlite:///{tmp_path}/tk.db", "mcp", "--agent", "billing-bot",
        "--config", str(DEMO_CONFIG)], env=dict(os.environ))  # this checkout's sources
    async with Client(params, read_timeout_seconds=30) as c:
        assert "lookup_invoice" in [t.name for t in (await c.list_tools()).tools]
        r = await c.call_tool("lookup_invoice", {"invoice_id": "INV-1001"})
        assert not r.is_error
        listed = await c.list_resources()
        uri = next(str(x.uri) for x in listed.resources if str(x.uri).endswith("/enabled"))
        assert "lookup_invoice" in str(await c.read_resource(uri))
    loaded = json.loads(out.read_text())
    assert "toolkeeper.mcp.server" in loaded and "toolkeeper.mcp.views" in loaded
    assert rest_modules(loaded) == []
