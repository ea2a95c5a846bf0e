"""On a terminal a listing is a table as wide as the terminal, not one wrapped at 80
columns (issue 15 item 5); piped, it is plain lines (tests/cli/test_plain_tables.py)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

from tests.support.processes import child_env


def _on_a_terminal(args: list[str], columns: int, timeout: float = 60.0) -> str:
    """What ``toolkeeper *args`` prints to a pseudo-terminal ``columns`` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = child_env()
    for name in ("COLUMNS", "LINES", "TOOLKEEPER_TOKEN", "TOOLKEEPER_DATABASE_URL"):
        env.pop(name, None)
    env["TERM"] = "xterm"
    proc = subprocess.Popen([sys.executable, "-m", "toolkeeper.cli", *args], env=env,
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=10) == 0, out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(leader)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))  # no colours


def test_a_listing_on_a_terminal_is_a_table_as_wide_as_the_terminal(db_url: str,
                                                                    demo_store: str) -> None:
    text = _on_a_terminal(["--db", db_url, "tools", "list"], columns=180)
    lines = [line for line in text.replace("\r", "").splitlines() if line.strip()]
    assert any(ch in text for ch in "┃│━─┏┗"), text  # a rich table, not plain lines
    assert "pay_invoice" in text
    widest = max(len(line) for line in lines)
    assert 80 < widest <= 180, (widest, text)
