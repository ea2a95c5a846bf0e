"""A small asyncio HTTP/1.1 keep-alive client: the request path of the lean upstream client.

``httpx`` costs about as much CPU per upstream ``tools/call`` as the rest of the gateway's
hop (pool bookkeeping, anyio streams, h11's pure-Python framing). An upstream call is one
POST and one answer, so this module does exactly that on a plain :class:`asyncio.Protocol`:

- a bounded pool per upstream (``max_connections``; at most ``max_idle`` kept): an idle
  connection is reused only if the server has neither closed it nor sent anything since
  (and it idled less than ``KEEPALIVE_EXPIRY_S``); a connection goes back to the pool only
  after its answer was read to the end and neither side asked to close; concurrent
  requests each get their own connection;
- requests: ``POST``/``DELETE`` with ``Content-Length``; answers: status line, headers
  (names case-insensitive), bodies by ``Content-Length``, ``Transfer-Encoding: chunked`` or
  read to close; ``1xx`` interim answers other than ``101`` are skipped (as httpx does);
- https through :mod:`ssl` with the context httpx itself would build (default verification,
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``, SNI, ALPN ``http/1.1``);
- bounded: the status line and headers to ``MAX_HEADER_BYTES``, a body to
  ``MAX_BODY_BYTES``; every wait for the server to ``read_timeout_s`` (per read, as httpx
  does), connecting to ``connect_timeout_s``.

Hand-written framing, chosen by measurement: parsing one request and answer (JSON, or one SSE
event, chunked) costs ~5 µs here and with ``httptools`` (C), ~105 µs with ``h11``; hand
parsing needs no optional C extension and reads an SSE stream incrementally from the same
buffer. What it does not handle (a content coding, a transfer coding other than chunked,
bare-LF line ends, obsolete header folding) raises :class:`Unsupported`; the caller then
uses httpx. Errors are :class:`ConnectFailed` (nothing was sent), :class:`ReadTimeout` and
:class:`ProtocolFailure` (the request may have reached the server).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping

from toolkeeper.upstream.rawhttp_wire import (
    HIGH_WATER,
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    MAX_INTERIM,
    NO_BODY,
    Conn,
    ConnectFailed,
    HttpFailure,
    ProtocolFailure,
    ReadTimeout,
    Target,
    Unsupported,
    alpn,
    encode_headers,
    parse_head,
)

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "ConnectFailed", "HttpFailure", "Pool",
           "ProtocolFailure", "ReadTimeout", "Response", "Target", "Unsupported",
           "encode_headers"]


class Response:
    """The status and headers of an answer; its body is read with :meth:`read` or
    :meth:`pieces`, then the connection goes back to the pool (or is closed)."""

    def __init__(self, pool: Pool, conn: Conn, status: int, headers: dict[str, str],
                 keep_alive: bool, timeout_s: float | None) -> None:
        self.status = status
        self.headers = headers
        self._pool = pool
        self._conn: Conn | None = conn
        self._timeout_s = timeout_s
        self._keep_alive = keep_alive
        self._chunked = False
        self._left_in_chunk = 0
        self._after_chunk = False
        self._total = 0
        self._left: int | None = None  # Content-Length left; None: chunked or to close
        self._done = False
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("identity", ""):
            raise Unsupported(f"content coding {coding!r}")
        te = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if status in NO_BODY:
            self._left = 0
        elif te is not None:
            if te.strip().lower() != "chunked":
                raise Unsupported(f"transfer coding {te!r}")
            self._chunked = True
            if length is not None:  # RFC 9112 6.3: chunked wins, and the connection ends
                self._keep_alive = False
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not (value := values.pop()).isdigit() or len(value) > 18:
                raise ProtocolFailure(f"an invalid Content-Length {length[:40]!r}")
            self._left = int(value)
            if self._left > MAX_BODY_BYTES:
                raise ProtocolFailure(f"the answer's body exceeds {MAX_BODY_BYTES} bytes")
        else:
            self._keep_alive = False  # read to close
        if self._left == 0:
            self._finish()

    async def read(self) -> bytes:
        """The whole body (at most ``MAX_BODY_BYTES``)."""
        conn = self._conn
        left = self._left
        if conn is not None and left is not None and len(conn.buf) >= left:
            body = bytes(conn.buf[:left])  # the common case: all of it is here
            del conn.buf[:left]
            self._left = 0
            self._finish()
            return body
        parts = []
        while (piece := await self.next_piece()) is not None:
            parts.append(piece)
        return b"".join(parts)

    async def next_piece(self) -> bytes | None:
        """The next piece of the body as it arrives (``None``: the end); all of it is
        bounded by ``MAX_BODY_BYTES``. On any error the connection is closed."""
        try:
            piece = await self._next_piece()
        except BaseException:
            self.discard()
            raise
        if piece is not None:
            self._total += len(piece)
            if self._total > MAX_BODY_BYTES:
                self.discard()
                raise ProtocolFailure(f"the answer's body exceeds {MAX_BODY_BYTES} bytes")
        return piece

    async def _next_piece(self) -> bytes | None:
        conn = self._conn
        if self._done or conn is None:
            return None
        t = self._timeout_s
        if self._left is not None:  # Content-Length
            piece = await conn.read_some(self._left, t)
            self._left -= len(piece)
            if not self._left:
                self._finish()
            return piece
        if not self._chunked:  # to close
            try:
                return await conn.read_some(HIGH_WATER, t)
            except ProtocolFailure:
                if conn.eof and not conn.buf and conn.lost is None:  # a clean close
                    self._finish()
                    return None
                raise
        while True:  # chunked: one chunk (of at most HIGH_WATER bytes at a time)
            if self._left_in_chunk:
                piece = await conn.read_some(self._left_in_chunk, t)
                self._left_in_chunk -= len(piece)
                if not self._left_in_chunk:
                    self._after_chunk = True
                return piece
            if self._after_chunk:
                if await conn.read_line(2, t):
                    raise ProtocolFailure("a chunk does not end with CRLF")
                self._after_chunk = False
            size_line = await conn.read_line(4096, t)
            size_text = size_line.split(b";", 1)[0].strip()
            if not size_text or len(size_text) > 15 or \
                    size_text.lstrip(b"0123456789abcdefABCDEF"):
                raise ProtocolFailure(f"an invalid chunk size {size_line[:40]!r}")
            size = int(size_text, 16)
            if size == 0:
                trailers = 0
                while line := await conn.read_line(MAX_HEADER_BYTES, t):
                    trailers += len(line) + 2
                    if trailers > MAX_HEADER_BYTES:
                        raise ProtocolFailure("the answer's trailers are too large")
                self._finish()
                return None
            if size > MAX_BODY_BYTES:
                raise ProtocolFailure(f"the answer's body exceeds {MAX_BODY_BYTES} bytes")
            self._left_in_chunk = size

    def _finish(self) -> None:
        """The body was read to its end: the connection goes back, or is closed."""
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._release(conn, reuse=self._keep_alive)

    def discard(self) -> None:
        """Stop reading: the connection is closed (unless the body was already read)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._release(conn, reuse=False)

    async def drain(self, timeout_s: float, most: int) -> None:
        """Read and drop the rest (at most ``most`` bytes within ``timeout_s``), so the
        connection can be reused; else it is closed."""
        self._timeout_s = min(self._timeout_s or timeout_s, timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                got = 0
                while (piece := await self.next_piece()) is not None:
                    got += len(piece)
                    if got > most:
                        break
        except (HttpFailure, TimeoutError, OSError):
            pass
        finally:
            self.discard()


class Pool:
    """Keep-alive connections to one origin; ``request`` sends one request and returns
    the answer's head (its body is the caller's to read or discard)."""

    def __init__(self, url: str, *, headers: Mapping[str, str], connect_timeout_s: float,
                 max_connections: int = 64, max_idle: int = 32,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.target = Target(url)
        self.connect_timeout_s = connect_timeout_s
        self._max = max_connections
        self._max_idle = max_idle
        self._ssl = ssl_context if self.target.tls else None
        if self.target.tls and ssl_context is None:
            raise Unsupported("https needs an SSL context", sent=False)
        given = {name.lower() for name in headers}
        fixed = {**({} if "host" in given else {"Host": self.target.host_header}), **headers}
        self._prefix: dict[str, bytes] = {
            method: f"{method} {self.target.path} HTTP/1.1\r\n".encode("latin-1")
            + encode_headers(fixed) for method in ("POST", "DELETE")}
        self._idle: deque[Conn] = deque()
        self._count = 0  # open connections, idle or in use
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._drains: set[asyncio.Task[None]] = set()
        self._closed = False

    async def request(self, method: str, headers: bytes, body: bytes,
                      timeout_s: float | None, connect_timeout_s: float | None = None,
                      ) -> Response:
        """Send ``method`` with the pool's fixed headers, ``headers`` (encoded lines) and
        ``body``; the answer's head is read within ``timeout_s`` per wait; a new connection
        within ``connect_timeout_s`` (default: the pool's)."""
        conn = await self._acquire(timeout_s, connect_timeout_s or self.connect_timeout_s)
        try:
            await conn.write(b"".join((self._prefix[method], headers, b"Content-Length: ",
                                       str(len(body)).encode(), b"\r\n\r\n", body)), timeout_s)
            for _ in range(MAX_INTERIM + 1):
                status, fields, keep = parse_head(await conn.read_head(timeout_s))
                if status >= 200:
                    break
                if status == 101:
                    raise ProtocolFailure("the server switched protocols unasked (101)")
            else:
                raise ProtocolFailure(f"more than {MAX_INTERIM} interim (1xx) answers")
            return Response(self, conn, status, fields, keep, timeout_s)
        except BaseException:
            self._release(conn, reuse=False)
            raise

    def drain_later(self, response: Response, timeout_s: float = 1.0) -> None:
        """Finish reading ``response`` in the background (the caller has what it needs)."""
        task = asyncio.get_running_loop().create_task(
            response.drain(timeout_s, MAX_BODY_BYTES))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _acquire(self, timeout_s: float | None, connect_timeout_s: float) -> Conn:
        if self._closed:
            raise ConnectFailed("the client is closed")
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._idle:
            conn = self._idle.pop()  # the most recently used
            if conn.reusable(now):
                return conn
            self._count -= 1
            conn.close()
        while self._count >= self._max:  # wait for a slot, bounded like httpx's pool wait
            waiter: asyncio.Future[None] = loop.create_future()
            self._slot_waiters.append(waiter)
            try:
                async with asyncio.timeout(timeout_s):
                    await waiter
            except TimeoutError:
                raise ReadTimeout("no free connection to the server in time") from None
            finally:
                if waiter in self._slot_waiters:
                    self._slot_waiters.remove(waiter)
            if self._idle:
                return await self._acquire(timeout_s, connect_timeout_s)
        self._count += 1
        try:
            return await self._connect(loop, connect_timeout_s)
        except BaseException:
            self._count -= 1
            self._wake_one()
            raise

    async def _connect(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> Conn:
        t = self.target
        try:
            async with asyncio.timeout(timeout_s):
                _transport, conn = await loop.create_connection(
                    lambda: Conn(loop), t.host, t.port, ssl=self._ssl,
                    server_hostname=t.host if self._ssl is not None else None)
        except TimeoutError:
            raise ConnectFailed(f"no connection within {timeout_s:g} s") from None
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConnectFailed(str(exc) or type(exc).__name__) from exc
        if self._ssl is not None:
            proto = alpn(_transport)
            if proto not in (None, "http/1.1"):
                conn.close()
                raise Unsupported(f"the server chose {proto!r} by ALPN", sent=False)
        return conn

    def _release(self, conn: Conn, *, reuse: bool) -> None:
        if reuse and not self._closed and len(self._idle) < self._max_idle and \
                not conn.eof and not conn.buf:
            conn.idle_since = conn.loop.time()
            self._idle.append(conn)
        else:
            self._count -= 1
            conn.close()
        self._wake_one()

    def _wake_one(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._drains):
            task.cancel()
        if self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)
        while self._idle:
            self._idle.pop().close()
            self._count -= 1
