"""An upstream MCP server over HTTP that dies, hangs or answers garbage after its tools were
imported: every call comes back within the server's timeout (never a hang), repeated
failures open the breaker (later calls refused fast with ``tool_unavailable``), and an
irreversible call is ``unknown`` only where it may have run upstream (the request went
out and no answer came) and ``failed`` where it surely did not (connection refused)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.loopback import QuietServer
from toolkeeper import CallResult, Gateway
from toolkeeper.bench.procs import free_port, listening

FIXTURE = Path(__file__).resolve().parents[1] / "mcp" / "upstream_fixture.py"
TIMEOUT_S = 2
BOUND_S = TIMEOUT_S * 5
"""Generous against a loaded machine, far below a hang."""


class Garbage(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b"\x00not json, not SSE {{{"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_DELETE = do_POST

    def log_message(self, *_args: Any) -> None:
        pass


class Hang(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.server.release.wait(BOUND_S * 3)  # type: ignore[attr-defined]

    do_GET = do_DELETE = do_POST

    def log_message(self, *_args: Any) -> None:
        pass


@contextmanager
def _on_port(port: int, handler: type[BaseHTTPRequestHandler]) -> Iterator[None]:
    httpd = QuietServer(("127.0.0.1", port), handler)
    httpd.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.release.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[Gateway, int, Any]]:
    """A gateway that imported ``fx_echo`` (declared irreversible) from a live fixture
    server; the test gets the port and a function that stops that server."""
    port = free_port()
    (tmp_path / "description.txt").write_text("Echo the text back.")
    server = listening([sys.executable, str(FIXTURE), "http", "{port}"],
                       {**os.environ, "FIXTURE_DESCRIPTION": str(tmp_path / "description.txt")},
                       port=port)
    server.__enter__()
    doc = {"version": 1,
           "servers": [{"name": "fx", "url": f"http://127.0.0.1:{port}/mcp",
                        "timeout_s": TIMEOUT_S,
                        "tools": {"echo": {"side_effect": "irreversible", "risk": "low"}}}],
           "profiles": [{"name": "p", "autonomy": 3, "activations": [{"tool": "fx_echo"}]}],
           "agents": [{"name": "a", "profile": "p"}]}
    cfg = tmp_path / "toolkeeper.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    stopped = []

    def stop() -> None:
        if not stopped:
            stopped.append(True)
            server.__exit__(None, None, None)

    try:
        with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=cfg) as gw:
            ok = gw.call_sync("fx_echo", agent="a", arguments={"text": "hi"})
            assert ok.status.value == "succeeded", ok
            yield gw, port, stop
    finally:
        stop()


def _timed(gw: Gateway, n: int) -> tuple[list[CallResult], float]:
    results, worst = [], 0.0
    for i in range(n):
        start = time.monotonic()
        results.append(gw.call_sync("fx_echo", agent="a", arguments={"text": f"t{i}"}))
        worst = max(worst, time.monotonic() - start)
    return results, worst


def _statuses(results: list[CallResult]) -> list[tuple[str, str | None]]:
    return [(r.status.value, str(r.reason) if r.reason else None) for r in results]


def _went_unavailable(gw: Gateway) -> bool:
    """The breaker's opening is audited (what GET /tools/health reports)."""
    gw.flush()
    return any(e.data.get("new") == "unavailable"
               for e in gw.store.audit.list("default", types=["tool.health_changed"]))


def test_a_killed_upstream_fails_not_unknown_then_opens_the_breaker(
        upstream: tuple[Gateway, int, Any]) -> None:
    gw, _port, stop = upstream
    stop()  # nobody listens: connection refused, nothing can have run
    results, worst = _timed(gw, 8)
    assert worst < BOUND_S, worst
    got = _statuses(results)
    assert all(s == "failed" for s, _ in got), got
    assert got[0][1] == "upstream_error", got
    assert got[-1][1] == "tool_unavailable", got  # the breaker opened
    assert _went_unavailable(gw)


@pytest.mark.parametrize("handler", [Hang, Garbage], ids=["hung", "garbage"])
def test_a_hung_or_garbage_upstream_answers_within_the_timeout(
        upstream: tuple[Gateway, int, Any], handler: type[BaseHTTPRequestHandler]) -> None:
    gw, port, stop = upstream
    stop()
    with _on_port(port, handler):
        results, worst = _timed(gw, 8)
    assert worst < BOUND_S, worst
    got = _statuses(results)
    assert not [s for s, _ in got if s == "succeeded"], got
    assert not [r for _, r in got if r == "internal_error"], got
    assert got[-1] == ("failed", "tool_unavailable"), got  # the breaker opened
    # the calls the breaker let through reached a server that may have acted on them
    assert _went_unavailable(gw)
    # the first call went out on the live session and got no usable answer: it may have
    # acted upstream (later ones may fail to reconnect first: then they surely did not)
    assert got[0][0] == "unknown", got
    if handler is Hang:
        assert got[0] == ("unknown", "timeout"), got
