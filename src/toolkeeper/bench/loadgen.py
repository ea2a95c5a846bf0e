"""An HTTP/1.1 load generator for the REST benchmark, so ``make bench`` needs no wrk or hey.

Raw asyncio protocol on uvloop, keep-alive connections, one pre-encoded request: the client
does no more work per request than write bytes and parse a status line and a length. Two
modes, like wrk and wrk2/hey:

- ``closed``: each of ``connections`` sends its next request as the previous answer arrives
  (the maximum rate);
- ``rate``: the connections together send ``rate`` requests per second on a fixed schedule;
  latency counts from the scheduled send time (no coordinated omission).

Run it in its own process (``python -m toolkeeper.bench.loadgen``, JSON on stdout) so it does
not share an interpreter with what it measures. Every run is bounded by ``seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Load:
    """What one run did: answers by status, latencies (ms) and the achieved rate."""

    requests: int = 0
    errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def build_request(url: str, method: str = "GET", body: bytes = b"",
                  headers: dict[str, str] | None = None) -> tuple[str, int, bytes]:
    """``(host, port, request bytes)`` for a keep-alive HTTP/1.1 request to ``url``."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError("the load generator speaks plain http:// to one host")
    port = parts.port or 80
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.hostname}:{port}",
             f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return parts.hostname, port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Conn(asyncio.Protocol):
    """One keep-alive connection: one request in flight; ``answered`` wakes the sender."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.answered: asyncio.Future[int] | None = None
        self.transport: Any = None  # uvloop's transports are no asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        length = _content_length(bytes(self.buf[:end]))
        if len(self.buf) < end + 4 + length:
            return
        status = int(self.buf[9:12])
        del self.buf[:end + 4 + length]
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(status)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.answered is not None and not self.answered.done():
            self.answered.set_exception(ConnectionError("the server closed the connection"))


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def trivial(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The smallest ASGI app (``uvicorn toolkeeper.bench.loadgen:trivial``): the generator's
    ceiling is measured against it."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _one(conn: _Conn, request: bytes) -> int:
    conn.answered = asyncio.get_running_loop().create_future()
    conn.transport.write(request)
    return await asyncio.wait_for(conn.answered, 10.0)


async def run_load(url: str, *, connections: int, seconds: float, rate: float | None = None,
                   method: str = "GET", body: bytes = b"",
                   headers: dict[str, str] | None = None) -> Load:
    """Drive ``url`` for ``seconds`` over ``connections`` keep-alive connections, closed
    loop (``rate`` None) or at ``rate`` requests/s in total."""
    host, port, request = build_request(url, method, body, headers)
    loop = asyncio.get_running_loop()
    conns = [(await loop.create_connection(_Conn, host, port))[1] for _ in range(connections)]
    load = Load()
    started = time.perf_counter()
    stop = started + seconds
    interval = connections / rate if rate else 0.0

    async def drive(i: int, conn: _Conn) -> None:
        due = started + (i * interval / connections)
        while True:
            if interval:
                due += interval
                if due >= stop:
                    return
                if due > time.perf_counter():
                    await asyncio.sleep(due - time.perf_counter())
            t0 = due if interval else time.perf_counter()
            if t0 >= stop:
                return
            try:
                status = await _one(conn, request)
            except (ConnectionError, TimeoutError):
                load.errors += 1
                return
            load.latencies_ms.append((time.perf_counter() - t0) * 1000)
            load.requests += 1
            key = str(status)
            load.statuses[key] = load.statuses.get(key, 0) + 1

    try:
        await asyncio.wait_for(asyncio.gather(*(drive(i, c) for i, c in enumerate(conns))),
                               seconds + 30)
    finally:
        load.seconds = time.perf_counter() - started
        for c in conns:
            if c.transport is not None:
                c.transport.close()
    return load


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolkeeper.bench.loadgen", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("-c", "--connections", type=int, default=32)
    p.add_argument("-d", "--seconds", type=float, default=5.0)
    p.add_argument("--rate", type=float, help="total requests/s (default: closed loop)")
    p.add_argument("-m", "--method", default="GET")
    p.add_argument("--body", default="", help="request body (sent as given)")
    p.add_argument("-H", "--header", action="append", default=[], metavar="NAME: VALUE")
    p.add_argument("--out", help="write the JSON report to this file (default: stdout)")
    args = p.parse_args(argv)
    headers = dict(h.split(": ", 1) for h in args.header)
    import uvloop  # comes with uvicorn[standard], as the servers measured use it

    load = uvloop.run(run_load(args.url, connections=args.connections, seconds=args.seconds,
                           rate=args.rate, method=args.method, body=args.body.encode(),
                           headers=headers))
    doc = asdict(load) | {"rate": load.rate}
    if args.out:  # a file: a report of many latencies through a pipe uvloop left
        Path(args.out).write_text(json.dumps(doc), encoding="utf-8")  # non-blocking can tear
    else:
        print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
