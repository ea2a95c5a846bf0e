"""The connection bounds (api/connection_limits.py) on a real uvicorn server on loopback,
built and configured as ``toolkeeper serve`` builds it, driven the way clients send: a raw
socket that writes a request's head and body in one ``sendall`` (as curl does), and curl
itself where it is installed.

- The head bound counts the head only: a body past 64 KiB in the head's write is read as a
  body (an answer about the call, never 431); a 70 KiB header is still 431.
- A body past the 2 MB cap, declared or chunked, is answered 413 and the client reads it:
  the server drains what the client still sends (bounded) before it closes, instead of
  resetting the connection under the answer. A client that never stops is cut off.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.loopback import serving_app
from tests.support.serve import free_port
from toolkeeper.api import connection_limits as limits
from toolkeeper.server import ServerSettings, build, connection_limits

KIB, MB = 1024, 1_000_000
CAP = 2 * MB
"""The default body cap (``max_body_bytes``)."""
HEADER_TIMEOUT_S = 2
PATHS = ("/tools/execute", "/mcp")
CURL = shutil.which("curl")


@dataclass(frozen=True)
class Served:
    port: int
    agent: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The demo gateway behind uvicorn with ``serve``'s own connection settings."""
    work = tmp_path_factory.mktemp("conn")
    port = free_port()
    settings = ServerSettings(database_url=f"sqlite:///{work}/tk.db", port=port, demo=True,
                              secrets_backend="env", header_timeout_s=HEADER_TIMEOUT_S,
                              log_level="warning")
    server = build(settings)
    agent = next(a.token for a in server.tokens if a.title.startswith("demo agent token"))
    try:
        with serving_app(server.app, what="uvicorn started", port=port, started_within=30,
                         joined_within=15, loop="uvloop", lifespan="on", server_header=False,
                         **connection_limits(settings)):
            yield Served(port, agent)
    finally:
        server.close()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        """The JSON body (the last ``data:`` line of an event stream)."""
        text = self.body.decode()
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            text = [line for line in text.splitlines() if line.startswith("data:")][-1][5:]
        parsed = json.loads(text)
        assert isinstance(parsed, dict)
        return parsed


def _head(served: Served, path: str, framing: str, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {served.agent}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{framing}\r\n{extra}\r\n"
            ).encode()


def _read(sock: socket.socket) -> Answer:
    """One HTTP/1.1 response (content-length or chunked) read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, f"closed before a response head: {data!r}"
        data += got
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    if "content-length" in headers:
        size = int(headers["content-length"])
        while len(rest) < size:
            got = sock.recv(65536)
            assert got, "closed inside the response body"
            rest += got
        return Answer(int(lines[0].split()[1]), headers, rest[:size])
    body = b""
    while True:  # chunked
        while b"\r\n" not in rest:
            rest += sock.recv(65536)
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(rest) < size + 2:
            got = sock.recv(65536)
            assert got, "closed inside a chunk"
            rest += got
        if size == 0:
            return Answer(int(lines[0].split()[1]), headers, body)
        body, rest = body + rest[:size], rest[size + 2:]


def _exchange(served: Served, request: bytes) -> Answer:
    """``request`` written in ONE ``sendall`` (head and body together, as curl does), then
    the response read."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(request)
        return _read(sock)


def _body(path: str, size: int) -> bytes:
    """A request of about ``size`` bytes: a call of the demo's ``lookup_invoice`` with an
    argument its schema does not allow (REST), an ``initialize`` (MCP)."""
    if path == "/mcp":
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "big", "version": "1"},
            "_meta": {"pad": "x" * size}}}).encode()
    return json.dumps({"tool": "lookup_invoice",
                       "arguments": {"invoice_id": "INV-1001", "note": "x" * size}}).encode()


def _chunked(body: bytes, chunk: int = 1 * MB) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + chunk]), body[i:i + chunk])
             for i in range(0, len(body), chunk)]
    return b"".join(parts) + b"0\r\n\r\n"


def _assert_answered_about_the_call(path: str, answer: Answer) -> None:
    assert answer.status != 431, answer
    if path == "/mcp":
        assert answer.status == 200, answer
        assert answer.json()["result"]["serverInfo"]  # type: ignore[index]
    else:  # the pipeline read the whole body: it names the argument at its end
        assert answer.status == 422, answer
        error = answer.json()["error"]
        assert error["reason"] == "invalid_arguments", error  # type: ignore[index]
        assert "'note' was unexpected" in error["message"], error  # type: ignore[index]


@pytest.mark.parametrize("size", [70 * KIB, 100 * KIB, 500 * KIB, 900 * KIB])
@pytest.mark.parametrize("path", PATHS)
def test_a_body_past_64_kib_written_with_its_head_is_a_body_not_a_head(served: Served,
                                                                        path: str,
                                                                        size: int) -> None:
    body = _body(path, size)
    answer = _exchange(served, _head(served, path, f"Content-Length: {len(body)}") + body)
    _assert_answered_about_the_call(path, answer)


@pytest.mark.parametrize("path", PATHS)
def test_a_chunked_body_written_with_its_head_is_a_body_not_a_head(served: Served,
                                                                    path: str) -> None:
    body = _body(path, 900 * KIB)
    answer = _exchange(served, _head(served, path, "Transfer-Encoding: chunked")
                       + _chunked(body, 300 * KIB))
    _assert_answered_about_the_call(path, answer)


@pytest.mark.parametrize("size", [70 * KIB, 1024 * KIB])
@pytest.mark.parametrize("path", PATHS)
def test_a_header_past_64_kib_is_still_431_and_the_client_reads_it(served: Served, path: str,
                                                                   size: int) -> None:
    body = _body(path, 10)
    answer = _exchange(served, _head(served, path, f"Content-Length: {len(body)}",
                                     f"X-Big: {'a' * size}\r\n") + body)
    assert answer.status == 431, answer
    assert answer.json()["error"]["reason"] == "header_too_large"  # type: ignore[index]


def test_the_next_request_on_a_connection_has_its_head_bounded_again(served: Served) -> None:
    """After a request with a body past 64 KiB, the next head on the same connection counts
    from its own first byte: small passes, 70 KiB is 431."""
    body = _body("/tools/execute", 100 * KIB)
    request = _head(served, "/tools/execute", f"Content-Length: {len(body)}") + body
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        for _ in range(2):
            sock.sendall(request)
            _assert_answered_about_the_call("/tools/execute", _read(sock))
        sock.sendall(_head(served, "/tools/execute", "Content-Length: 2",
                           f"X-Big: {'a' * 70 * KIB}\r\n") + b"{}")
        assert _read(sock).status == 431


def test_leading_blank_lines_do_not_end_the_head(served: Served) -> None:
    """The parser skips empty lines before a request line: they must not pass for the end
    of a head whose headers then go on unbounded."""
    answer = _exchange(served, b"\r\n\r\n" * 4 + _head(
        served, "/tools/execute", "Content-Length: 2", f"X-Big: {'a' * 70 * KIB}\r\n")
        + b"{}")
    assert answer.status == 431, answer


def _assert_413(path: str, answer: Answer) -> None:
    assert answer.status == 413, answer
    if path == "/mcp":
        error = answer.json()["error"]
        assert error["code"] == -32600 and "exceeds" in error["message"], error  # type: ignore[index]
    else:
        assert answer.json()["error"]["reason"] == "payload_too_large"  # type: ignore[index]


@pytest.mark.parametrize("path", PATHS)
def test_a_12_mb_chunked_body_is_413_and_the_client_reads_it(served: Served,
                                                             path: str) -> None:
    answer = _exchange(served, _head(served, path, "Transfer-Encoding: chunked")
                       + _chunked(_body(path, 12 * MB)))
    _assert_413(path, answer)


@pytest.mark.parametrize("path", PATHS)
def test_a_20_mb_body_in_one_write_is_413_and_the_client_reads_it(served: Served,
                                                                  path: str) -> None:
    body = _body(path, 20 * MB)
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head(served, path, f"Content-Length: {len(body)}") + body)
        _assert_413(path, _read(sock))
        # the body drained, the connection serves the next request
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n\r\n"
                     .encode())
        assert _read(sock).status == 200


@pytest.mark.parametrize("path", PATHS)
def test_a_20_mb_body_with_connection_close_is_413_and_the_client_reads_it(
        served: Served, path: str) -> None:
    """The connection closes after the answer: only once the body has drained, and the
    client sees the end of the answer (FIN) before that."""
    body = _body(path, 20 * MB)
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head(served, path, f"Content-Length: {len(body)}",
                           "Connection: close\r\n") + body)
        _assert_413(path, _read(sock))
        assert sock.recv(1) == b""


@pytest.mark.skipif(CURL is None, reason="no curl")
@pytest.mark.parametrize("expect", ["", "100-continue"])
@pytest.mark.parametrize("path", PATHS)
def test_curl_posting_20_mb_reads_the_413(served: Served, path: str, expect: str,
                                          tmp_path: Path) -> None:
    """curl writes head and body at once (``Expect:`` empty), or waits for ``100
    Continue`` and gets the 413 first."""
    big = tmp_path / "big.json"
    big.write_bytes(_body(path, 20 * MB))
    assert CURL is not None
    done = subprocess.run(
        [CURL, "-sS", "--max-time", "120", "-o", str(tmp_path / "out"), "-w", "%{http_code}",
         "-H", f"Authorization: Bearer {served.agent}", "-H", "Content-Type: application/json",
         "-H", "Accept: application/json, text/event-stream", "-H", f"Expect: {expect}",
         "--data-binary", f"@{big}", f"http://127.0.0.1:{served.port}{path}"],
        capture_output=True, text=True, timeout=180, check=False)
    assert (done.returncode, done.stdout) == (0, "413"), done.stderr
    _assert_413(path, Answer(413, {}, (tmp_path / "out").read_bytes()))


def _send_until_cut(sock: socket.socket, *, within: float) -> bool:
    """Write to ``sock`` until the server cuts it off (True) or ``within`` seconds pass."""
    chunk = b"x" * MB
    deadline = time.monotonic() + within
    sock.settimeout(5)
    while time.monotonic() < deadline:
        try:
            sock.sendall(chunk)
        except (ConnectionError, TimeoutError):
            return True
    return False


@pytest.mark.parametrize("framing", ["Content-Length: 1000000000000",
                                     "Transfer-Encoding: chunked"])
@pytest.mark.parametrize("path", PATHS)
def test_a_client_that_never_stops_sending_is_cut_off(served: Served, path: str,
                                                      framing: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After the 413 the drain is bounded by bytes: a client that sends forever is
    disconnected (the time bound put out of reach, so the byte bound is what ends it)."""
    monkeypatch.setattr(limits, "DRAIN_MAX_SECONDS", 10**6)
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head(served, path, framing))
        if framing.startswith("Transfer"):
            sock.sendall(b"%x\r\n" % (10**12))
        assert _send_until_cut(sock, within=120), "still accepting bytes after 120 s"


def test_the_drain_ends_when_the_client_stops_sending(served: Served,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that sends part of its body after the 413, then nothing, is disconnected
    (the time bound put out of reach: the idle bound, ``header_timeout_s``, ends it)."""
    monkeypatch.setattr(limits, "DRAIN_MAX_SECONDS", 10**6)
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head(served, "/tools/execute", f"Content-Length: {20 * MB}")
                     + b"x" * MB)
        _assert_413("/tools/execute", _read(sock))
        with contextlib.suppress(ConnectionError):
            assert sock.recv(1) == b""


def test_an_idle_connection_after_a_drained_body_is_closed(served: Served) -> None:
    """Once a drained body ends, the connection waits for the next head under the head
    deadline again (``header_timeout_s``), not forever."""
    body = _body("/tools/execute", 3 * MB)
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(_head(served, "/tools/execute", f"Content-Length: {len(body)}") + body)
        _assert_413("/tools/execute", _read(sock))
        assert sock.recv(1) == b""
