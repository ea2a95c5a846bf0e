"""SPEC §7 MCP over stdio: ``toolkeeper mcp --agent NAME`` as a real subprocess, driven by
the official SDK client in both eras; an unknown agent exits 2-style with a reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from mcp import Client, StdioServerParameters
from toolkeeper.demo.runner import DEMO_CONFIG

BIN = Path(sys.executable).parent / "toolkeeper"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('stdio')}/tk.db"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_agent_over_stdio_lists_and_calls_its_tools(db: str, mode: str) -> None:
    # the process loads the demo config: its native tools live in an importable module
    params = StdioServerParameters(command=str(BIN), args=[
        "--db", db, "mcp", "--agent", "billing-bot", "--config", str(DEMO_CONFIG)])
    async with Client(params, mode=mode, read_timeout_seconds=30) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["lookup_invoice", "pay_invoice", "refund_invoice", "send_email"]
        r = await c.call_tool("lookup_invoice", {"invoice_id": "INV-1001"})
        assert not r.is_error and r.structured_content["id"] == "INV-1001"
        with pytest.raises(MCPError) as info:  # the janitor's tool
            await c.call_tool("delete_repository", {"repo": "x"})
        assert info.value.code == -32602


def test_an_unknown_agent_is_refused_before_serving(db: str) -> None:
    res = subprocess.run([str(BIN), "--db", db, "mcp", "--agent", "ghost"], timeout=60,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert res.returncode != 0 and "no agent 'ghost'" in res.stderr
    assert res.stdout == ""  # stdout belongs to the protocol
