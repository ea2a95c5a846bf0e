"""How ``serve``'s HTTP protocol (api/connection_limits.py) writes an answer to the socket:
the head uvicorn writes alone on ``http.response.start`` goes out with the body's first
write, in one write (a head alone woke the client for half an answer: a wasted wake-up on
every call's path, measured by ``make bench --only mcp``); a stream's head, whose body
comes later, is not held for it; a ``100 Continue`` goes out at once, on its own.

A real uvicorn server on loopback, the protocol's transport wrapped to record each write.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.loopback import serving_app
from toolkeeper.api.connection_limits import BoundedHttpToolsProtocol

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
STREAM_PAUSE_S = 1.0
WRITES: list[bytes] = []


class _Recorder:
    """The socket's transport, each write recorded."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: Any) -> None:
        WRITES.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class Recording(BoundedHttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Recorder(transport))  # type: ignore[arg-type]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:  # the whole body (a 100 Continue is asked for here)
        more = (await receive()).get("more_body", False)
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await asyncio.sleep(STREAM_PAUSE_S)
        await send({"type": "http.response.body", "body": b"data: x\n\n"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]})
    await send({"type": "http.response.body", "body": BODY})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving_app(app, what="uvicorn started", http=Recording, lifespan="on",
                     server_header=False, date_header=False) as p:
        yield p


def _until(sock: socket.socket, data: bytes, end: bytes) -> bytes:
    while end not in data:
        got = sock.recv(65536)
        assert got, f"closed early: {data!r}"
        data += got
    return data


def test_a_json_answer_is_one_write_head_and_body(port: int) -> None:
    WRITES.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for _ in range(3):  # on a kept-alive connection too
            sock.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            _until(sock, b"", BODY)
    assert len(WRITES) == 3, WRITES
    for write in WRITES:
        assert write.startswith(b"HTTP/1.1 200 OK\r\n") and write.endswith(b"\r\n\r\n" + BODY)


def test_a_streams_head_is_not_held_for_its_first_event(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=STREAM_PAUSE_S / 2) as sock:
        sock.sendall(b"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        head = _until(sock, b"", b"\r\n\r\n")  # times out if held until the event
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"data:" not in head
        sock.settimeout(STREAM_PAUSE_S * 10)
        assert b"data: x" in _until(sock, head, b"data: x")


def test_a_100_continue_goes_out_alone_before_the_body_is_sent(port: int) -> None:
    WRITES.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        interim = _until(sock, b"", b"\r\n\r\n")
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"{}")
        _until(sock, b"", BODY)
    assert len(WRITES) == 2, WRITES
    assert WRITES[0] == interim and WRITES[1].endswith(b"\r\n\r\n" + BODY)


def test_a_head_requests_answer_is_written(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"HEAD /json HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _until(sock, b"", b"\r\n\r\n").startswith(b"HTTP/1.1 200 OK\r\n")
