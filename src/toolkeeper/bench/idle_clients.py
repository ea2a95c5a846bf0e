"""Idle 2025-11-25 MCP sessions for the idle-sessions benchmark, in a process of their own.

``python -m toolkeeper.bench.idle_clients URL TOKEN N``: N sessions, each on a connection of
its own (HTTP/1.1 with ``h11``, no SDK: ten thousand SDK clients would measure the clients),
each ``initialize`` then ``notifications/initialized`` then a ``GET`` stream held open, its
bytes read and dropped. Prints one JSON line once every session is open or refused
(``{"opened", "refused", "retry_after", "errors"}``), then holds them until its standard
input closes. ``--until-refused``: stop opening at the first refusal (the cap's check).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11

PROTOCOL = "2025-11-25"
OPENING_AT_ONCE = 64
STEP_TIMEOUT_S = 30.0
INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {},
               "clientInfo": {"name": "toolkeeper-bench-idle", "version": "1"}}}).encode()
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


@dataclass
class Report:
    opened: int = 0
    refused: int = 0
    retry_after: str | None = None
    errors: list[str] = field(default_factory=list)


class Session:
    """One connection: its requests in turn, then the GET stream it keeps."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port, self.token = host, port, token
        self.conn = h11.Connection(our_role=h11.CLIENT)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.drain: asyncio.Task[None] | None = None

    async def open(self) -> tuple[int, dict[str, str]]:
        """``(status, headers)`` of the ``initialize``; on 200 the session is set up and
        its GET stream open."""
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        status, headers = await self._send("POST", {}, INITIALIZE)
        sid = headers.get("mcp-session-id")
        if status != 200 or sid is None:
            return status, headers
        more = {"mcp-session-id": sid, "mcp-protocol-version": PROTOCOL}
        ack, _ = await self._send("POST", more, INITIALIZED)
        if ack != 202:
            raise RuntimeError(f"notifications/initialized answered {ack}")
        stream, _ = await self._send("GET", more, b"", whole=False)
        if stream != 200:
            raise RuntimeError(f"the GET stream answered {stream}")
        self.drain = asyncio.create_task(self._dropping())
        return status, headers

    async def _send(self, method: str, extra: dict[str, str], body: bytes, *,
                    whole: bool = True) -> tuple[int, dict[str, str]]:
        assert self.reader is not None and self.writer is not None
        headers = [("host", f"{self.host}:{self.port}"),
                   ("authorization", f"Bearer {self.token}"),
                   ("accept", "application/json, text/event-stream"
                    if method == "POST" else "text/event-stream"), *extra.items()]
        if method == "POST":
            headers += [("content-type", "application/json"),
                        ("content-length", str(len(body)))]
        out = self.conn.send(h11.Request(method=method, target="/mcp", headers=headers))
        out += self.conn.send(h11.Data(data=body)) if body else b""
        self.writer.write(out + self.conn.send(h11.EndOfMessage()))
        response: h11.Response | None = None
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(self.reader.read(65536), STEP_TIMEOUT_S)
                self.conn.receive_data(data)
                if not data:
                    raise RuntimeError("the server closed the connection")
            elif isinstance(event, h11.Response):
                response = event
                if not whole:
                    break
            elif isinstance(event, h11.EndOfMessage):
                break
        assert response is not None
        if whole and self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        return response.status_code, {k.decode(): v.decode() for k, v in response.headers}

    async def _dropping(self) -> None:
        assert self.reader is not None
        while await self.reader.read(65536):
            pass

    def close(self) -> None:
        if self.drain is not None:
            self.drain.cancel()
        if self.writer is not None:
            self.writer.close()


async def open_sessions(url: str, token: str, n: int, *, until_refused: bool = False
                        ) -> tuple[Report, list[Session]]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    report, kept = Report(), []
    gate = asyncio.Semaphore(1 if until_refused else OPENING_AT_ONCE)

    async def one() -> None:
        async with gate:
            if until_refused and report.refused:
                return
            s = Session(host, port, token)
            try:
                status, headers = await s.open()
            except Exception as exc:  # counted and shown, never hidden
                s.close()
                report.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                return
            if status == 200:
                report.opened += 1
                kept.append(s)
                return
            s.close()
            if status == 503:
                report.refused += 1
                report.retry_after = headers.get("retry-after")
            else:
                report.errors.append(f"initialize answered {status}")

    await asyncio.gather(*(one() for _ in range(n)))
    return report, kept


async def _main(url: str, token: str, n: int, until_refused: bool) -> None:
    report, kept = await open_sessions(url, token, n, until_refused=until_refused)
    print(json.dumps(asdict(report) | {"errors": report.errors[:5],
                                       "error_count": len(report.errors)}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # held until the parent lets go
    for s in kept:
        s.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolkeeper.bench.idle_clients",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", help="the server's base URL (its /mcp is used)")
    p.add_argument("token")
    p.add_argument("n", type=int)
    p.add_argument("--until-refused", action="store_true")
    args = p.parse_args(argv)
    import uvloop  # comes with uvicorn[standard]

    uvloop.run(_main(args.url, args.token, args.n, args.until_refused))
    return 0


def parse_report(line: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(line)
    return doc


if __name__ == "__main__":
    sys.exit(main())
