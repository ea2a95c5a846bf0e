"""Resource abuse attack suite on a real ``toolkeeper serve``: many idle connections, slowloris
clients trickling a request's headers, oversized headers and more connections than allowed —
the server keeps answering others, closes idle and slow connections after
``header_timeout_s``, answers an oversized head 431 and new requests beyond
``max_connections`` 503. The limits are written down in docs/guarantees.md (resource
abuse)."""

from __future__ import annotations

import contextlib
import select
import socket
from pathlib import Path

import httpx
import pytest

from tests.api.test_server import serving
from tests.attacks.table import ProbeTable
from tests.support.waiting import wait_until

IDLE, SLOW = 200, 100


def _open(port: int, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if first:
        sock.sendall(first)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """The server closed ``sock`` (EOF or reset); never blocks."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(4096) == b""
    except ConnectionError:
        return True


def _answer(sock: socket.socket) -> str:
    try:
        data = sock.recv(256)
    except (TimeoutError, ConnectionError):
        return "closed"
    return data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"


@pytest.mark.slow
def test_idle_slow_and_oversized_clients_do_not_stop_the_server(tmp_path: Path) -> None:
    table = ProbeTable("resource abuse (real serve)")
    limits = {"TOOLKEEPER_HEADER_TIMEOUT_S": "2", "TOOLKEEPER_MAX_HEADER_BYTES": "32768"}
    with serving(tmp_path, "abuse", extra_env=limits) as (base, _out):
        port = httpx.URL(base).port
        assert port is not None
        held: list[socket.socket] = []
        try:
            held += [_open(port) for _ in range(IDLE)]
            held += [_open(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a")
                     for _ in range(SLOW)]
            for sock in held[IDLE:]:
                sock.sendall(b"a")  # one more trickled byte each: never a complete request
            ok = httpx.get(f"{base}/healthz", timeout=10)
            table.add(f"/healthz with {IDLE} idle + {SLOW} slowloris open", "200",
                      str(ok.status_code), ok.status_code == 200)
            for size in (64 * 1024, 1024 * 1024):
                big = _open(port)
                with contextlib.suppress(ConnectionError):  # closed after the 431 early
                    big.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
                                + b"a" * size + b"\r\n\r\n")
                answer = _answer(big)
                big.close()
                # a reset can overtake the 431 the client has not read yet: refused either way
                table.add(f"{size // 1024} KiB header (cap 32 KiB)", "431 or closed",
                          answer[:22], answer.startswith("HTTP/1.1 431 ") or answer == "closed")
            closed = wait_until(lambda: all(_closed_by_server(s) for s in held),
                                timeout=30, what="idle and slowloris connections closed")
            table.add(f"{IDLE} idle + {SLOW} slowloris after header_timeout_s=2",
                      "all closed by the server", "all closed" if closed else "open", closed)
            many = sum(httpx.get(f"{base}/healthz", timeout=10).status_code == 200
                       for _ in range(20))
            table.add("20 requests after the abuse", "20 x 200", f"{many} x 200", many == 20)
        finally:
            for sock in held:
                sock.close()
    table.check()


@pytest.mark.slow
def test_connections_beyond_max_connections_get_503(tmp_path: Path) -> None:
    table = ProbeTable("connection cap (real serve)")
    limits = {"TOOLKEEPER_MAX_CONNECTIONS": "20", "TOOLKEEPER_HEADER_TIMEOUT_S": "120"}
    with serving(tmp_path, "cap", extra_env=limits) as (base, _out):
        port = httpx.URL(base).port
        assert port is not None
        held = [_open(port) for _ in range(20)]
        try:
            over = _open(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _answer(over)
            over.close()
            table.add("21st connection with 20 held (cap 20)", "503", answer[:28],
                      answer.startswith("HTTP/1.1 503 "))
        finally:
            for sock in held:
                sock.close()
        ok = wait_until(lambda: httpx.get(f"{base}/healthz", timeout=10).status_code == 200,
                        timeout=30, what="/healthz answers once the held connections closed")
        table.add("/healthz after they closed", "200", "200" if ok else "-", ok)
    table.check()
