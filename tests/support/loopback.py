"""Loopback HTTP servers for tests (bounded start and stop, quiet about hang-ups): a
``http.server`` handler, or an ASGI app under uvicorn."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn

from tests.support.serve import free_port
from tests.support.waiting import wait_until


class QuietServer(ThreadingHTTPServer):
    """Clients that hang up on purpose (size and time caps) are not errors here."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``http://127.0.0.1:<port>`` served by ``handler`` until the block ends."""
    httpd = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@contextmanager
def serving_app(app: Any, *, what: str, port: int | None = None, started_within: float = 10,
                joined_within: float = 10, **config: Any) -> Iterator[int]:
    """``app`` served by uvicorn on ``127.0.0.1:<port>`` (a free one if not given) in a
    thread until the block ends: the port. ``what``: the start awaited, as a timeout names
    it; ``config``: more of uvicorn's settings."""
    port = free_port() if port is None else port
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: bool(server.started), timeout=started_within, what=what)
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=joined_within)


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler base: ``reply(body)`` answers 200 with ``body`` as JSON."""

    def reply(self, body: object, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class CannedMcp(JsonHandler):
    """A 2025-11-25 MCP server over plain HTTP (JSON answers, no sessions) that answers each
    method from :meth:`answers`, and -32601 for others; for upstreams no SDK server can be
    made to be (malformed listings, garbled results)."""

    def answers(self) -> dict[str, Any]:
        raise NotImplementedError

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:  # a notification
            self.send_response(202)
            self.end_headers()
            return
        found = self.answers().get(message["method"])
        self.reply({"jsonrpc": "2.0", "id": message["id"], **(
            {"result": found} if found is not None else
            {"error": {"code": -32601, "message": "Method not found"}})})

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.end_headers()

