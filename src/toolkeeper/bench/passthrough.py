"""The MCP benchmarks' floor for a gateway: a passthrough that forwards each request to the
upstream and its answer back, and does nothing else (``python -m
toolkeeper.bench.passthrough PORT UPSTREAM_URL``).

It runs on the stack ``toolkeeper serve`` runs on (uvicorn with httptools and uvloop) and
sends through toolkeeper's own upstream HTTP pool (:mod:`toolkeeper.upstream.rawhttp`), so
its CPU per call and throughput are what any gateway on this stack pays before it decides,
records or checks anything: the bench prints them beside toolkeeper's as information. It
reads each answer whole before sending it on (the upstreams' answers to a call end with
the call), forwards ``POST`` and ``DELETE`` with the MCP headers, and answers ``GET`` (a
2025-era client's stream for server messages) with 405, which the SDKs' clients accept.
"""

from __future__ import annotations

import sys
from typing import Any

from toolkeeper.upstream.rawhttp import Pool, encode_headers

FORWARDED = frozenset({b"accept", b"content-type", b"last-event-id"})
"""Request headers sent on besides every ``mcp-*`` one (session, protocol version, the
2026 era's method and name headers)."""
RETURNED = ("content-type", "mcp-session-id", "mcp-protocol-version")
READ_TIMEOUT_S = 30.0


class Passthrough:
    """The ASGI app: one keep-alive pool to the upstream, made on first use (it needs the
    running loop)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._pool: Pool | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method = scope["method"]
        if method not in ("POST", "DELETE"):
            await _answer(send, 405, [(b"allow", b"POST, DELETE")], b"")
            return
        if self._pool is None:
            self._pool = Pool(self.upstream, headers={}, connect_timeout_s=5.0)
        headers = {name.decode("latin-1"): value.decode("latin-1")
                   for name, value in scope["headers"]
                   if name in FORWARDED or name.startswith(b"mcp-")}
        response = await self._pool.request(method, encode_headers(headers), body,
                                            READ_TIMEOUT_S)
        data = await response.read()
        back = [(name.encode(), response.headers[name].encode())
                for name in RETURNED if name in response.headers]
        await _answer(send, response.status, back, data)


async def _answer(send: Any, status: int, headers: list[tuple[bytes, bytes]],
                  body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return


def main(argv: list[str]) -> None:
    import uvicorn

    port, upstream = int(argv[0]), argv[1]
    uvicorn.run(Passthrough(upstream), host="127.0.0.1", port=port, loop="uvloop",
                http="httptools", log_level="warning", access_log=False)


if __name__ == "__main__":
    main(sys.argv[1:])
