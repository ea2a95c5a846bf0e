"""The wire side of :mod:`toolkeeper.upstream.rawhttp`: its limits and errors, the request
target and header encoding, one connection's protocol (buffer, waiter, reads) and the
parsing of an answer's head. No pooling here."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024
"""Status line, headers (and chunked trailers) of one answer."""
MAX_BODY_BYTES = 32 * 1024 * 1024
"""One answer's body. The gateway takes MCP messages up to ``max_body_bytes`` (2 MB by
default) from its own clients and caps a tool's output far lower (``max_output_chars``), but
an upstream's ``tools/list`` page of 10,000 tools (SPEC §10's catalog scale) is some MB:
32 MiB leaves room for that and for inline images while bounding a hostile server."""
KEEPALIVE_EXPIRY_S = 5.0
"""An idle connection older than this is closed, not reused (httpx's default too)."""
HIGH_WATER = 256 * 1024
"""Reading pauses while this much is buffered unread."""
NO_BODY = frozenset({204, 304})
MAX_INTERIM = 8
"""1xx answers skipped before the final one, at most."""


class HttpFailure(Exception):
    """Base of this module's errors."""


class ConnectFailed(HttpFailure):
    """No connection (refused, unresolvable, TLS failure or connect timeout): nothing sent."""


class ReadTimeout(HttpFailure):
    """The server sent nothing for ``read_timeout_s`` (or did not take the request)."""


class ProtocolFailure(HttpFailure):
    """The connection was lost or the answer is not HTTP/1.1 this client reads."""


class Unsupported(ProtocolFailure):
    """Something this client does not handle and httpx does: fall back to it. ``sent``
    is false when the request surely did not go out (so it can be sent again)."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class Target:
    """Where requests go: scheme, host, port, the request target and the ``Host`` header."""

    __slots__ = ("host", "host_header", "path", "port", "tls")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unsupported(f"not an http(s) URL: {url!r}", sent=False)
        if parts.username or parts.password:
            raise Unsupported("credentials in the URL", sent=False)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        default = 443 if self.tls else 80
        self.port = parts.port or default
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = shown if self.port == default else f"{shown}:{self.port}"
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        _check_token(self.path, "path")


def _check_token(value: str, what: str) -> None:
    forbidden = "\r\n\x00 " if what == "path" else "\r\n\x00"
    if any(c in value for c in forbidden) or (what == "path" and not value.isascii()):
        raise Unsupported(f"a {what} this client does not send: {value[:80]!r}",
                          sent=False)


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """``Name: value\\r\\n`` lines, refusing what would break the framing."""
    out = []
    for name, value in headers.items():
        if not name or any(c in name for c in ":\r\n\x00 \t"):
            raise Unsupported(f"a header name this client does not send: {name[:80]!r}",
                              sent=False)
        _check_token(value, "header value")
        out.append(f"{name}: {value}\r\n")
    try:
        return "".join(out).encode("ascii")
    except UnicodeEncodeError as exc:
        raise Unsupported("a header that is not ASCII", sent=False) from exc


class Conn(asyncio.Protocol):
    """One connection: an unread-bytes buffer and one waiter at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buf = bytearray()
        self.eof = False
        self.lost: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writable: asyncio.Future[None] | None = None

    # -- protocol callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > HIGH_WATER and self.transport is not None \
                and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.lost = exc
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- used by the pool and the response ------------------------------------------------

    def reusable(self, now: float) -> bool:
        """Idle, open, nothing unexpected received, not expired. The socket is polled too:
        a close the loop has not processed yet (it was not running) shows as readable."""
        t = self.transport
        if (self.eof or self.buf or t is None or t.is_closing()
                or now - self.idle_since >= KEEPALIVE_EXPIRY_S):
            return False
        return not _readable(t.get_extra_info("socket"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()  # no lingering: the answer was not read to its end

    async def write(self, data: bytes, timeout_s: float | None) -> None:
        assert self.transport is not None
        if self.eof or self.transport.is_closing():  # nothing sent: nothing can have run
            raise ConnectFailed("the connection closed before the request was sent")
        self.transport.write(data)
        if self._writable is not None and not self._writable.done():
            try:
                async with asyncio.timeout(timeout_s):
                    await self._writable
            except TimeoutError:
                raise ReadTimeout("the server does not take the request") from None
            if self.eof:
                raise ProtocolFailure("the connection closed while sending the request")

    async def wait(self, timeout_s: float | None) -> None:
        """Until more bytes, EOF, or ``timeout_s`` (→ :class:`ReadTimeout`)."""
        if self.eof:
            raise ProtocolFailure(self._lost_text())
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        waiter: asyncio.Future[None] = self.loop.create_future()
        self._waiter = waiter
        timer = None if timeout_s is None else self.loop.call_later(
            timeout_s, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def _lost_text(self) -> str:
        return f"the server closed the connection ({self.lost})" if self.lost else \
            "the server closed the connection"

    async def read_line(self, limit: int, timeout_s: float | None) -> bytes:
        """One CRLF-terminated line (without it), at most ``limit`` bytes."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                if i > limit:
                    raise ProtocolFailure(f"a line longer than {limit} bytes")
                if i == 0 or self.buf[i - 1] != 13:
                    raise Unsupported("a bare LF line end")
                line = bytes(self.buf[:i - 1])
                del self.buf[:i + 1]
                return line
            if len(self.buf) > limit:
                raise ProtocolFailure(f"a line longer than {limit} bytes")
            start = len(self.buf)
            await self.wait(timeout_s)

    async def read_head(self, timeout_s: float | None) -> bytes:
        """Everything up to and without the blank line ending a header block."""
        start = 0
        while True:
            i = self.buf.find(b"\r\n\r\n", start)
            if i >= 0:
                if i + 4 > MAX_HEADER_BYTES:
                    break
                head = bytes(self.buf[:i])
                del self.buf[:i + 4]
                return head
            if len(self.buf) > MAX_HEADER_BYTES:
                break
            if self.buf.find(b"\n\n", max(0, start - 1)) >= 0:
                raise Unsupported("a bare LF line end")
            start = max(0, len(self.buf) - 3)
            await self.wait(timeout_s)
        raise ProtocolFailure(f"the answer's headers exceed {MAX_HEADER_BYTES} bytes")

    async def read_some(self, most: int, timeout_s: float | None) -> bytes:
        """1 to ``most`` buffered bytes, waiting if none (EOF → :class:`ProtocolFailure`)."""
        while not self.buf:
            await self.wait(timeout_s)
        piece = bytes(self.buf[:most])
        del self.buf[:most]
        return piece


def _readable(sock: Any) -> bool:
    """Whether an idle connection's socket has something to read (EOF, or bytes nobody
    asked for): either way it is not reused."""
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("no answer within the read timeout"))


def alpn(transport: asyncio.BaseTransport) -> str | None:
    obj = transport.get_extra_info("ssl_object")
    return obj.selected_alpn_protocol() if obj is not None else None


def parse_head(head: bytes) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-case names; repeats joined by ``, ``) and keep-alive."""
    lines = head.split(b"\r\n")
    status_line = lines[0]
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit() \
            or (len(rest) > 3 and rest[3:4] != b" "):
        if version.startswith(b"HTTP/2"):
            raise Unsupported("an HTTP/2 answer")
        raise ProtocolFailure(f"not an HTTP/1.x status line: {status_line[:60]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip() or b"\n" in line or b"\r" in line:
            if line[:1] in (b" ", b"\t"):
                raise Unsupported("obsolete header folding")
            raise ProtocolFailure(f"an invalid header line {line[:60]!r}")
        key = name.decode("latin-1").lower()
        text = value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    connection = headers.get("connection", "").lower()
    keep = "close" not in connection if version == b"HTTP/1.1" else "keep-alive" in connection
    return int(code), headers, keep
