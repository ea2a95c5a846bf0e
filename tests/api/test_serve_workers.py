"""``toolkeeper serve --workers 2``: one bootstrap, several worker processes on one port."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
from test_server import _mcp_lookup

from tests.support.waiting import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_workers_share_the_port_and_the_store(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "TOOLKEEPER_DATABASE_URL": f"sqlite:///{tmp_path}/w.db",
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", "serve", "--port",
                             str(port), "--workers", "2", "--demo", "--log-level", "info"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            assert proc.poll() is None, "serve exited early"
            return httpx.get(base + "/healthz", timeout=1).status_code == 200

        wait_until(healthy, timeout=60, what=f"{base}/healthz answers",
                   ignoring=(httpx.HTTPError,))
        agent, seen = _token_from_output(proc, "demo agent token")
        for _ in range(20):  # spread over both workers by the kernel
            res = httpx.post(base + "/tools/execute", timeout=10,
                             headers={"Authorization": f"Bearer {agent}"},
                             json={"tool": "lookup_invoice",
                                   "arguments": {"invoice_id": "INV-1001"}})
            assert res.status_code == 200 and res.json()["status"] == "succeeded", res.text
        for _ in range(5):  # stateless 2026-07-28 MCP: any worker answers any request
            names, found = anyio.run(_mcp_lookup, base + "/mcp", agent, "auto")
            assert "lookup_invoice" in names and found["id"] == "INV-1001"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    text = seen + out.decode()
    assert text.count("demo agent token") == 1  # the workers print no tokens
    assert len(set(re.findall(r"Finished server process \[(\d+)\]", text))) == 2


def _token_from_output(proc: subprocess.Popen[bytes], title: str) -> tuple[str, str]:
    """The token printed after ``title``, and everything read up to it."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        seen += line
        if title in line:
            return line.rsplit(":", 1)[1].strip(), seen
    raise AssertionError(f"no {title!r} printed")
